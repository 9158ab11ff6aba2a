// Package terraform_test checks the terraform modules offline: every file is
// formatted (terraform fmt), and every module and environment validates
// (terraform init -backend=false, then terraform validate) when the providers
// can be had without the network: from a filesystem mirror named by
// TALLY_TERRAFORM_MIRROR, from the CLI configuration TF_CLI_CONFIG_FILE
// names, or from terraform's own local plugin directories. Where they
// cannot, the module's subtest skips, naming the providers it lacks.
package terraform_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// EnvMirror names directories (colon-separated) laid out as a provider
// filesystem mirror, e.g. made by `terraform providers mirror DIR` in each
// environment on a machine with the network.
const EnvMirror = "TALLY_TERRAFORM_MIRROR"

// machineMirror is a provider mirror the project's build machines carry
// (hashicorp/aws); used when EnvMirror is not set, so that CI validates
// the modules it can.
const machineMirror = "/opt/tf-plugins"

func terraformBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not installed (not on PATH): install terraform 1.5 or later (https://developer.hashicorp.com/terraform/install) to check the modules under terraform/")
	}
	return bin
}

// TestFormatted runs `terraform fmt -check -recursive` over terraform/.
func TestFormatted(t *testing.T) {
	bin := terraformBinary(t)
	out, err := tf(t, bin, ".", nil, "fmt", "-check", "-recursive", "-diff", "-no-color")
	if err != nil {
		t.Fatalf("terraform fmt -check -recursive terraform/ fails (run terraform fmt -recursive terraform/): %v\n%s", err, out)
	}
}

// TestFormatCheckCatchesMisformattedFiles shows the check above is real:
// fmt -check fails on a misformatted file and passes on the same file
// formatted.
func TestFormatCheckCatchesMisformattedFiles(t *testing.T) {
	bin := terraformBinary(t)
	for _, c := range []struct {
		name, src string
		ok        bool
	}{
		{"formatted", "variable \"a\" {\n  type    = string\n  default = \"x\"\n}\n", true},
		{"unaligned equals", "variable \"a\" {\n  type = string\n  default = \"x\"\n}\n", false},
		{"tab indent", "variable \"a\" {\n\ttype = string\n}\n", false},
		{"spaces around braces", "resource \"x\" \"y\"{\n  a=1\n}\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := tf(t, bin, dir, nil, "fmt", "-check", "-recursive", "-no-color")
			if c.ok && err != nil {
				t.Fatalf("fmt -check fails on a formatted file: %v\n%s", err, out)
			}
			if !c.ok {
				if err == nil {
					t.Fatalf("fmt -check passes a misformatted file:\n%s", c.src)
				}
				if !strings.Contains(string(out), "main.tf") {
					t.Fatalf("fmt -check failed without naming the file: %v\n%s", err, out)
				}
			}
		})
	}
}

// TestValidate runs terraform init -backend=false and terraform validate in
// every module and environment, on a copy of terraform/ (init writes a lock
// file next to the configuration) with its own TF_DATA_DIR.
func TestValidate(t *testing.T) {
	bin := terraformBinary(t)
	roots := configurations(t)
	if len(roots) < 5 {
		t.Fatalf("found only %v: the modules and environments are missing", roots)
	}
	tree := t.TempDir()
	copyTree(t, ".", tree)
	env, source := providerSource(t)
	t.Logf("providers from %s", source)
	for _, root := range roots {
		t.Run(root, func(t *testing.T) {
			dir := filepath.Join(tree, root)
			runEnv := append(slices.Clone(env), "TF_DATA_DIR="+t.TempDir())
			out, err := tf(t, bin, dir, runEnv, "init", "-backend=false", "-input=false", "-no-color")
			if err != nil {
				if missing := missingProviders(string(out)); len(missing) > 0 {
					t.Skipf("cannot validate %s offline: terraform init found no %s in %s. To provide them: where the registry is reachable, run `terraform providers mirror DIR` in terraform/environments/saas, copy DIR here and set %s=DIR (or set TF_CLI_CONFIG_FILE to a CLI configuration whose provider_installation names a mirror).",
						root, strings.Join(missing, ", "), source, EnvMirror)
				}
				t.Fatalf("terraform init in %s: %v\n%s", root, err, out)
			}
			out, err = tf(t, bin, dir, runEnv, "validate", "-no-color")
			if err != nil {
				t.Fatalf("terraform validate in %s: %v\n%s", root, err, out)
			}
		})
	}
}

// configurations lists every directory of terraform/ holding .tf files.
func configurations(t *testing.T) []string {
	t.Helper()
	var roots []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".tf") {
			if dir := filepath.Dir(p); !slices.Contains(roots, dir) {
				roots = append(roots, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(roots)
	return roots
}

// copyTree copies the .tf files of src into dst, keeping their folders, and
// leaves behind whatever a local init made (.terraform, lock files).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && p != src {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, p), 0o755)
		}
		if !strings.HasSuffix(p, ".tf") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, p), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// providerSource returns the environment terraform runs in and says where
// the providers come from: the mirror of TALLY_TERRAFORM_MIRROR (through a
// CLI configuration written here, with no network fallback), else the CLI
// configuration of TF_CLI_CONFIG_FILE when that file exists, else
// terraform's defaults (its local plugin directories, then the registry).
func providerSource(t *testing.T) ([]string, string) {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TF_CLI_CONFIG_FILE=") && !strings.HasPrefix(kv, "TF_DATA_DIR=") {
			env = append(env, kv)
		}
	}
	env = append(env, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	m := os.Getenv(EnvMirror)
	if st, err := os.Stat(machineMirror); m == "" && err == nil && st.IsDir() {
		m = machineMirror
	}
	if m != "" {
		var b strings.Builder
		b.WriteString("provider_installation {\n")
		var dirs []string
		for _, d := range filepath.SplitList(m) {
			abs, err := filepath.Abs(d)
			if err != nil {
				t.Fatal(err)
			}
			if st, err := os.Stat(abs); err != nil || !st.IsDir() {
				t.Fatalf("%s names %s, which is not a directory", EnvMirror, d)
			}
			fmt.Fprintf(&b, "  filesystem_mirror {\n    path = %q\n  }\n", abs)
			dirs = append(dirs, abs)
		}
		b.WriteString("}\n")
		cfg := filepath.Join(t.TempDir(), "terraform.rc")
		if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return append(env, "TF_CLI_CONFIG_FILE="+cfg), "the filesystem mirror " + strings.Join(dirs, ", ") + " (" + EnvMirror + ")"
	}
	if c := os.Getenv("TF_CLI_CONFIG_FILE"); c != "" {
		if _, err := os.Stat(c); err == nil {
			return append(env, "TF_CLI_CONFIG_FILE="+c), "the CLI configuration " + c + " (TF_CLI_CONFIG_FILE)"
		}
	}
	// A missing TF_CLI_CONFIG_FILE makes terraform warn on every command:
	// an empty one means its defaults.
	empty := filepath.Join(t.TempDir(), "empty.rc")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return append(env, "TF_CLI_CONFIG_FILE="+empty), "terraform's local plugin directories or the registry (no " + EnvMirror + " set)"
}

// initProviderError matches the reasons init gives for a provider it could
// not install.
var (
	initProviderError = regexp.MustCompile(`Failed to query available provider packages|Failed to install provider|Incompatible provider version|could not connect to registry`)
	providerName      = regexp.MustCompile(`(?s)(?:for provider|provider)\s+((?:registry\.terraform\.io/)?[a-z0-9-]+/[a-z0-9-]+)\b`)
)

// missingProviders names the providers a failed init could not install, or
// nothing when it failed for another reason (which is the configuration's
// fault and fails the test).
func missingProviders(out string) []string {
	if !initProviderError.MatchString(out) {
		return nil
	}
	var names []string
	for _, block := range strings.Split(out, "Error: ")[1:] {
		if !initProviderError.MatchString(block) {
			continue
		}
		for _, m := range providerName.FindAllStringSubmatch(block, -1) {
			n := strings.TrimPrefix(m[1], "registry.terraform.io/")
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return []string{"(unnamed) providers"}
	}
	return names
}

func tf(t *testing.T, bin, dir string, env []string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	} else {
		cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1")
	}
	out, err := cmd.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return out, fmt.Errorf("terraform %s timed out (no network?): %w", args[0], err)
	}
	return out, err
}
