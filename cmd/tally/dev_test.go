package main

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack"
)

// The banner names the metrics port --admin-port gave, not the default,
// and none when --admin-port 0 turned the admin endpoints off.
func TestWelcomeNamesTheAdminPortInUse(t *testing.T) {
	creds := devstack.Credentials{}
	for port, want := range map[int]string{
		9090:  "http://127.0.0.1:9090/metrics",
		19190: "http://127.0.0.1:19190/metrics",
	} {
		var b strings.Builder
		printWelcome(&b, creds, ".tally/credentials.json", port)
		if !strings.Contains(b.String(), want) {
			t.Errorf("--admin-port %d: the banner does not name %s:\n%s", port, want, b.String())
		}
		if port != 9090 && strings.Contains(b.String(), ":9090") {
			t.Errorf("--admin-port %d: the banner still names 9090:\n%s", port, b.String())
		}
	}
	var b strings.Builder
	printWelcome(&b, creds, ".tally/credentials.json", 0)
	if strings.Contains(b.String(), "/metrics") {
		t.Errorf("--admin-port 0: the banner names a metrics address though none is served:\n%s", b.String())
	}
}

// With more than one router replica, the banner lists them all.
func TestWelcomeListsTheRouterReplicas(t *testing.T) {
	creds := devstack.Credentials{Routers: []string{"http://127.0.0.1:8080", "http://127.0.0.1:41001", "http://127.0.0.1:41002"}}
	var b strings.Builder
	printWelcome(&b, creds, ".tally/credentials.json", 0)
	for _, u := range creds.Routers {
		if !strings.Contains(b.String(), u) {
			t.Errorf("the banner does not name router %s:\n%s", u, b.String())
		}
	}
}
