package main

import (
	"encoding/json"
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
	secret := fs.String("secret", "", "signing secret (the broker's --secret)")
	secretFile := fs.String("secret-file", "", "read the signing secret from this file (the broker's --secret-file, or the secret file a broker without keys generated)")
	keys := fs.String("keys", "", "sign with a key of this JWK Set (or JWK) file instead: an oct secret, or a private EdDSA, ES256 or RS256 key")
	kid := fs.String("kid", "", "the key of --keys to sign with (its kid goes into the token's header); optional when the file holds one key")
	role := fs.String("role", "", "caller, bridge or admin (revocations; no --workspace)")
	workspace := fs.String("workspace", "", "workspace id, comma-separated ids, or '*' (callers only)")
	ttl := fs.Duration("ttl", 24*time.Hour, "validity")
	asJSON := fs.Bool("json", false, `print {"token":…,"jti":…,"expires_at":RFC 3339} instead of the token alone`)
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
	var key auth.SigningKey
	switch {
	case *keys != "":
		k, err := auth.LoadSigningKey(*keys, *kid)
		if err != nil {
			return usageError{err}
		}
		key = k
	case *kid != "":
		return usagef("--kid needs --keys")
	case *secret == "":
		return usagef("--secret, --secret-file or --keys is required")
	default:
		key = auth.SecretKey([]byte(*secret))
	}
	if *workspace == "" && *role != auth.RoleAdmin {
		return usagef("--workspace is required")
	}
	is, err := auth.Issue(key, *role, strings.Split(*workspace, ","), *ttl)
	if err != nil {
		return usageError{err}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(is)
	}
	fmt.Fprintln(stdout, is.Token)
	return nil
}
