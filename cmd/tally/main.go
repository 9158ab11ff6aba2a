// Command tally is the one binary of the platform: `tally dev` runs all of it
// locally; `tally router`, `tally regional` and `tally management` run one
// role each for production; `tally migrate` and `tally admin` look after the
// databases and the directory.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tallyhq/tally/internal/runtimex"
)

var commands = map[string]func(ctx context.Context, args []string) error{
	"dev":        runDev,
	"router":     runRouter,
	"regional":   runRegional,
	"management": runManagement,
	"migrate":    runMigrate,
	"admin":      runAdmin,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: tally dev|router|regional|management|migrate|admin [flags]  (tally COMMAND -h for flags)")
		os.Exit(2)
	}
	runtimex.TuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := commands[os.Args[1]](ctx, os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "tally "+os.Args[1]+":", err)
		os.Exit(1)
	}
}
