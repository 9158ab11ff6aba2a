package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/tenancy"
)

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ExitOnError)
	tenancyURL := fs.String("tenancy-url", "", "tenancy database URL to migrate")
	var regionalURLs listFlag
	fs.Var(&regionalURLs, "regional-url", "regional database URL to migrate (repeat, or comma-separate)")
	lockWait := fs.Duration("lock-wait", 10*time.Minute, "how long to wait for the migration lock another migrator holds")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tenancyURL == "" && len(regionalURLs) == 0 {
		return errors.New("give --tenancy-url and/or --regional-url")
	}
	opts := dbschema.MigrateOptions{LockWait: *lockWait}
	if *tenancyURL != "" {
		if err := dbschema.MigrateWith(ctx, *tenancyURL, tenancy.Migrations, tenancy.MigrationsDir, opts); err != nil {
			return fmt.Errorf("tenancy: %w", err)
		}
		fmt.Println("tenancy database migrated")
	}
	for _, u := range regionalURLs {
		if err := dbschema.MigrateWith(ctx, u, regional.Migrations, regional.MigrationsDir, opts); err != nil {
			return fmt.Errorf("regional: %w", err)
		}
		fmt.Println("regional database migrated")
	}
	return nil
}

func runAdmin(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "create-management-key" && args[0] != "register-cluster") {
		return errors.New("usage: tally admin create-management-key|register-cluster [flags]")
	}
	fs := flag.NewFlagSet("admin "+args[0], flag.ExitOnError)
	tenancyURL := fs.String("tenancy-url", "", "tenancy database URL")
	name := fs.String("name", "", "key name, or cluster name")
	region := fs.String("region", "", "register-cluster: region")
	kind := fs.String("kind", tenancy.Dedicated, "register-cluster: shared or dedicated")
	apiHost := fs.String("api-host", "", "register-cluster: public API host")
	dlHost := fs.String("download-host", "", "register-cluster: public download host")
	upstream := fs.String("upstream-url", "", "register-cluster: URL of the cluster's regional instances")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	pool, err := db.Open(ctx, *tenancyURL, db.Options{Name: "tally-admin"})
	if err != nil {
		return err
	}
	defer pool.Close()
	if args[0] == "register-cluster" {
		return db.InTx(ctx, pool, func(tx pgx.Tx) error {
			return tenancy.UpsertCluster(ctx, tx, tenancy.Cluster{Name: *name, Region: *region, Kind: *kind,
				APIHost: *apiHost, DownloadHost: *dlHost, UpstreamURL: *upstream})
		})
	}
	var k tenancy.ManagementKey
	var token string
	if err := db.InTx(ctx, pool, func(tx pgx.Tx) error {
		k, token, err = tenancy.CreateManagementKey(ctx, tx, *name)
		return err
	}); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]string{"id": k.ID, "token": token})
}
