package kubefake

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RBAC grants what a binding's role says, to whom it names, where it
// applies: a RoleBinding in its namespace only, even of a ClusterRole.
func TestRBACGrantsOnlyWhatABindingSays(t *testing.T) {
	podsReader := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}
	r := RBAC{
		Roles:        []rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Name: "peers", Namespace: "tally"}, Rules: podsReader}},
		ClusterRoles: []rbacv1.ClusterRole{{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: podsReader}},
		RoleBindings: []rbacv1.RoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Name: "peers", Namespace: "tally"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "peers"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tally-router"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: "tally-acme"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "reader"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tally-router", Namespace: "tally-acme"}}},
		},
	}
	router := ServiceAccountUser("tally", "tally-router")
	for _, tc := range []struct {
		name string
		a    Attributes
		ok   bool
	}{
		{"list pods in its namespace", Attributes{User: router, Verb: "list", Namespace: "tally", Resource: "pods"}, true},
		{"watch pods in its namespace", Attributes{User: router, Verb: "watch", Namespace: "tally", Resource: "pods"}, true},
		{"delete pods", Attributes{User: router, Verb: "delete", Namespace: "tally", Resource: "pods"}, false},
		{"list secrets", Attributes{User: router, Verb: "list", Namespace: "tally", Resource: "secrets"}, false},
		{"list pods of the cluster", Attributes{User: router, Verb: "list", Resource: "pods"}, false},
		{"list pods in another namespace", Attributes{User: router, Verb: "list", Namespace: "kube-system", Resource: "pods"}, false},
		{"another service account", Attributes{User: ServiceAccountUser("tally", "default"), Verb: "list", Namespace: "tally", Resource: "pods"}, false},
		{"a ClusterRole bound in one namespace", Attributes{User: ServiceAccountUser("tally-acme", "tally-router"), Verb: "get", Namespace: "tally-acme", Resource: "pods", Name: "x"}, true},
		{"a ClusterRole bound in one namespace, elsewhere", Attributes{User: ServiceAccountUser("tally-acme", "tally-router"), Verb: "get", Namespace: "tally", Resource: "pods", Name: "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.Authorize(tc.a); (err == nil) != tc.ok {
				t.Fatalf("%s: %v, want allowed %v", tc.a, err, tc.ok)
			}
		})
	}
}
