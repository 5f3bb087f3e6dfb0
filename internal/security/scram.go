// Package security holds the authentication primitives of the listeners: SCRAM (RFC 5802/7677)
// and PLAIN server exchanges, TLS configuration from PEM files that follows the files as they
// change, and Kafka's ssl.principal.mapping.rules. It knows nothing of the wire protocol or of
// where credentials are stored: callers pass lookups in.
package security

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Mechanism is a SCRAM mechanism. Type is Kafka's ScramMechanism number, as carried by
// DescribeUserScramCredentials and AlterUserScramCredentials.
type Mechanism struct {
	Name string
	Type int8
	hash func() hash.Hash
}

var (
	ScramSHA256 = Mechanism{Name: "SCRAM-SHA-256", Type: 1, hash: sha256.New}
	ScramSHA512 = Mechanism{Name: "SCRAM-SHA-512", Type: 2, hash: sha512.New}
)

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations, and the broker's cap in
// AlterUserScramCredentials).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// MechanismByName finds a SCRAM mechanism by its SASL name.
func MechanismByName(name string) (Mechanism, bool) {
	switch name {
	case ScramSHA256.Name:
		return ScramSHA256, true
	case ScramSHA512.Name:
		return ScramSHA512, true
	}
	return Mechanism{}, false
}

// MechanismByType finds a SCRAM mechanism by Kafka's number for it.
func MechanismByType(t int8) (Mechanism, bool) {
	switch t {
	case ScramSHA256.Type:
		return ScramSHA256, true
	case ScramSHA512.Type:
		return ScramSHA512, true
	}
	return Mechanism{}, false
}

// Credential is what the server keeps of a SCRAM password: enough to verify a client's proof
// and to prove itself, never enough to log in as the user elsewhere.
type Credential struct {
	Salt       []byte
	Iterations int32
	StoredKey  []byte
	ServerKey  []byte
}

// SaltPassword is Hi(password, salt, iterations) of RFC 5802.
func (m Mechanism) SaltPassword(password string, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(m.hash, password, salt, iterations, m.hash().Size())
}

// CredentialFromSalted derives the stored credential from a salted password, which is what
// AlterUserScramCredentials carries (the client salts the password itself).
func (m Mechanism) CredentialFromSalted(salted, salt []byte, iterations int32) Credential {
	clientKey := m.hmac(salted, []byte("Client Key"))
	h := m.hash()
	h.Write(clientKey)
	return Credential{
		Salt:       bytes.Clone(salt),
		Iterations: iterations,
		StoredKey:  h.Sum(nil),
		ServerKey:  m.hmac(salted, []byte("Server Key")),
	}
}

// NewCredential salts password with a fresh random salt.
func (m Mechanism) NewCredential(password string, iterations int) (Credential, error) {
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := m.SaltPassword(password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return m.CredentialFromSalted(salted, salt, int32(iterations)), nil
}

func (m Mechanism) hmac(key, msg []byte) []byte {
	mac := hmac.New(m.hash, key)
	mac.Write(msg)
	return mac.Sum(nil)
}

// ErrAuthFailed is every failed SCRAM or PLAIN login. It says nothing of why (unknown user,
// wrong password, bad proof), so that a client cannot probe which users exist; the reason goes
// to the server's log through the wrapped error.
var ErrAuthFailed = errors.New("authentication failed")

func authFailed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrAuthFailed, fmt.Sprintf(format, args...))
}

// CredentialLookup finds a user's credential for a mechanism; ok=false: no such user.
type CredentialLookup func(user string) (cred Credential, ok bool, err error)

// ScramServer is the server side of one SCRAM exchange: client-first, server-first,
// client-final, server-final.
type ScramServer struct {
	mech   Mechanism
	lookup CredentialLookup
	nonce  func() string

	step            int
	user            string
	cred            Credential
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	fullNonce       string
}

// NewScramServer starts an exchange that verifies against lookup.
func NewScramServer(m Mechanism, lookup CredentialLookup) *ScramServer {
	return &ScramServer{mech: m, lookup: lookup, nonce: randomNonce}
}

func randomNonce() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

// Step consumes a client message and returns the server's answer. done is true after the
// server-final message; the exchange has then authenticated User().
func (s *ScramServer) Step(msg []byte) (out []byte, done bool, err error) {
	switch s.step {
	case 0:
		s.step = 1
		out, err = s.clientFirst(string(msg))
		return out, false, err
	case 1:
		s.step = 2
		out, err = s.clientFinal(string(msg))
		return out, err == nil, err
	}
	return nil, false, authFailed("unexpected message after the exchange completed")
}

// User is the authenticated user once Step reported done.
func (s *ScramServer) User() string { return s.user }

func (s *ScramServer) clientFirst(msg string) ([]byte, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	cbind, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, authFailed("malformed client-first message")
	}
	switch {
	case cbind == "n" || cbind == "y":
	case strings.HasPrefix(cbind, "p="):
		return nil, authFailed("channel binding is not supported")
	default:
		return nil, authFailed("malformed client-first message")
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, authFailed("malformed client-first message")
	}
	s.gs2Header = cbind + "," + authzid + ","
	s.clientFirstBare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, authFailed("malformed client-first message")
	}
	user, err := saslName(attrs[0][2:])
	if err != nil {
		return nil, err
	}
	for _, ext := range attrs[2:] {
		// Kafka's one extension is tokenauth=true (delegation tokens), which is not served.
		if k, v, _ := strings.Cut(ext, "="); k == "tokenauth" && strings.EqualFold(v, "true") {
			return nil, authFailed("delegation token authentication is not supported")
		}
	}
	if authzid != "" {
		if !strings.HasPrefix(authzid, "a=") {
			return nil, authFailed("malformed authorization id")
		}
		if az, err := saslName(authzid[2:]); err != nil || az != user {
			return nil, authFailed("authorization id %q differs from user %q", authzid[2:], user)
		}
	}
	cnonce := attrs[1][2:]
	if cnonce == "" {
		return nil, authFailed("empty client nonce")
	}
	cred, found, err := s.lookup(user)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, authFailed("unknown user %q", user)
	}
	s.user, s.cred = user, cred
	s.fullNonce = cnonce + s.nonce()
	s.serverFirst = "r=" + s.fullNonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	return []byte(s.serverFirst), nil
}

func (s *ScramServer) clientFinal(msg string) ([]byte, error) {
	proofAt := strings.LastIndex(msg, ",p=")
	if proofAt < 0 {
		return nil, authFailed("client-final message has no proof")
	}
	withoutProof := msg[:proofAt]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, authFailed("malformed client-final message")
	}
	if cb, err := base64.StdEncoding.DecodeString(attrs[0][2:]); err != nil || string(cb) != s.gs2Header {
		return nil, authFailed("channel binding does not match")
	}
	if attrs[1][2:] != s.fullNonce {
		return nil, authFailed("nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(msg[proofAt+3:])
	if err != nil || len(proof) != len(s.cred.StoredKey) {
		return nil, authFailed("malformed client proof")
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	clientSignature := s.mech.hmac(s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSignature[i]
	}
	h := s.mech.hash()
	h.Write(clientKey)
	if !hmac.Equal(h.Sum(nil), s.cred.StoredKey) {
		return nil, authFailed("invalid proof for user %q", s.user)
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(s.mech.hmac(s.cred.ServerKey, authMessage))), nil
}

// saslName undoes RFC 5802's escaping of ',' and '=' in names.
func saslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", authFailed("malformed user name")
		}
		i += 2
	}
	return b.String(), nil
}
