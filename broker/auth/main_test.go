package auth_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A Verifier's JWKS fetches end with its Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
