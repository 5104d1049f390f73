package auth

import (
	"errors"

	"github.com/tetherdev/tether/protocol"
)

// RevokedMessage is the message of Verify's refusal of a revoked token
// (CodeUnauthorized), and of every door that finds the token revoked after
// Verify (a socket's CONNECT, an MCP request, tracked in package revoke).
const RevokedMessage = "token revoked"

// ErrRevoked is a refusal of a revoked token, as Verify gives it.
func ErrRevoked() *protocol.Error {
	return protocol.Errorf(protocol.CodeUnauthorized, RevokedMessage)
}

// IsRevoked reports whether err (from Verify) refuses a revoked token: one
// signed with a good key and not expired, since revocation is asked after
// the signature and expiry are checked.
func IsRevoked(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == protocol.CodeUnauthorized && pe.Message == RevokedMessage
}
