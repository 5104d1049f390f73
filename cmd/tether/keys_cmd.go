package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/MicahParks/jwkset"

	"github.com/tetherdev/tether/broker/auth"
)

// `tether keys new` and `tether keys remove` keep a broker's --keys set
// and the private keys that sign for it, so rotation needs no other tool.
func runKeys(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want 'new' or 'remove'")
	}
	switch args[0] {
	case "new":
		return runKeysNew(args[1:], stdout, stderr)
	case "remove":
		return runKeysRemove(args[1:], stdout, stderr)
	}
	return usagef("unknown subcommand %q (want 'new' or 'remove')", args[0])
}

func runKeysNew(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	alg := fs.String("alg", auth.AlgEdDSA, "EdDSA, ES256, RS256 or HS256")
	kid := fs.String("kid", "", "the new key's id (required)")
	private := fs.String("private", "", "file to write the private key to, a JWK Set of one key (0600; for `tether token --keys`; required)")
	publicSet := fs.String("public-set", "", "JWK Set file to add the public key to, made if missing (the broker's --keys; required)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *kid == "" || *private == "" || *publicSet == "" {
		return usagef("--kid, --private and --public-set are required")
	}
	set, err := readSet(*publicSet)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(set.Keys, func(k jwkset.JWKMarshal) bool { return k.KID == *kid }) {
		return usagef("%s already holds kid %q", *publicSet, *kid)
	}
	if _, err := os.Stat(*private); err == nil {
		return usagef("%s exists: not overwriting a private key", *private)
	}
	priv, pub, err := auth.GenerateKey(*alg, *kid)
	if err != nil {
		return usageError{err}
	}
	if err := writeSet(*private, jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{priv}}); err != nil {
		return err
	}
	set.Keys = append(set.Keys, pub)
	if err := writeSet(*publicSet, set); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %q (%s): private in %s, public added to %s (%d keys); send the broker SIGHUP to load it\n", *kid, *alg, *private, *publicSet, len(set.Keys))
	return nil
}

func runKeysRemove(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys remove", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kid := fs.String("kid", "", "the key to remove (required)")
	publicSet := fs.String("public-set", "", "the JWK Set file (the broker's --keys; required)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *kid == "" || *publicSet == "" {
		return usagef("--kid and --public-set are required")
	}
	set, err := readSet(*publicSet)
	if err != nil {
		return err
	}
	n := len(set.Keys)
	set.Keys = slices.DeleteFunc(set.Keys, func(k jwkset.JWKMarshal) bool { return k.KID == *kid })
	if len(set.Keys) == n {
		return usagef("%s holds no kid %q", *publicSet, *kid)
	}
	if len(set.Keys) == 0 {
		return usagef("%s would hold no key: a broker refuses an empty set", *publicSet)
	}
	if err := writeSet(*publicSet, set); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %q removed from %s (%d keys left); send the broker SIGHUP to drop it\n", *kid, *publicSet, len(set.Keys))
	return nil
}

// readSet reads a JWK Set file; a missing file is an empty set.
func readSet(path string) (jwkset.JWKSMarshal, error) {
	var set jwkset.JWKSMarshal
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return set, nil
	}
	if err != nil {
		return set, err
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return set, fmt.Errorf("%s is not a JWK Set: %w", path, err)
	}
	return set, nil
}

// writeSet replaces path with set, 0600 (an HS256 key is a secret), by a
// rename: a broker reloading on SIGHUP never reads half a file.
func writeSet(path string, set jwkset.JWKSMarshal) error {
	data, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
