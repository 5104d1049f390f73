package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tetherdev/tether/broker/auth"
)

func runToken(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret := fs.String("secret", env("TETHER_SECRET", ""), "signing secret (the broker's --secret)")
	secretFile := fs.String("secret-file", env("TETHER_SECRET_FILE", ""), "read the signing secret from this file (the broker's --secret-file, or the secret file a broker without keys generated)")
	role := fs.String("role", "", "caller, bridge or admin (revocations; no --workspace)")
	workspace := fs.String("workspace", env("TETHER_WORKSPACE", ""), "workspace id, comma-separated ids, or '*' (callers only)")
	ttl := fs.Duration("ttl", 24*time.Hour, "validity")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *secretFile != "" {
		if *secret != "" {
			return usagef("--secret and --secret-file exclude each other")
		}
		s, err := readSecretFile(*secretFile)
		if err != nil {
			return usageError{err}
		}
		*secret = s
	}
	if *secret == "" {
		return usagef("--secret or --secret-file is required")
	}
	if *workspace == "" && *role != auth.RoleAdmin {
		return usagef("--workspace is required")
	}
	tok, err := auth.IssueToken([]byte(*secret), *role, strings.Split(*workspace, ","), *ttl)
	if err != nil {
		return usageError{err}
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
