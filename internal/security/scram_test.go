package security

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func fixedLookup(user string, cred Credential) CredentialLookup {
	return func(u string) (Credential, bool, error) {
		if u != user {
			return Credential{}, false, nil
		}
		return cred, true, nil
	}
}

// RFC 7677 section 3: the SCRAM-SHA-256 exchange of user "user" with password "pencil".
func TestScramSHA256RFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := ScramSHA256.SaltPassword("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s := NewScramServer(ScramSHA256, fixedLookup("user", ScramSHA256.CredentialFromSalted(salted, salt, 4096)))
	s.nonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	first, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("client-first: done=%v err=%v", done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(first) != want {
		t.Fatalf("server-first = %q, want %q", first, want)
	}
	final, done, err := s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("client-final: done=%v err=%v", done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(final) != want {
		t.Fatalf("server-final = %q, want %q", final, want)
	}
	if s.User() != "user" {
		t.Fatalf("user = %q", s.User())
	}
}

func TestScramSHA256RFC7677VectorWrongProofFails(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, _ := ScramSHA256.SaltPassword("not-pencil", salt, 4096)
	s := NewScramServer(ScramSHA256, fixedLookup("user", ScramSHA256.CredentialFromSalted(salted, salt, 4096)))
	s.nonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	if _, _, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO")); err != nil {
		t.Fatal(err)
	}
	_, done, err := s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if done || !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("a proof for another password: done=%v err=%v, want ErrAuthFailed", done, err)
	}
}

// franz-go's SCRAM client against the server, both mechanisms: the exchange an actual client
// runs, right and wrong password.
func TestScramAgainstFranzGoClient(t *testing.T) {
	for _, m := range []Mechanism{ScramSHA256, ScramSHA512} {
		cred, err := m.NewCredential("s3cret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			user, pass string
			ok         bool
		}{{"alice", "s3cret", true}, {"alice", "wrong", false}, {"bob", "s3cret", false}} {
			a := scram.Auth{User: tc.user, Pass: tc.pass}
			mech := a.AsSha256Mechanism()
			if m.Type == ScramSHA512.Type {
				mech = a.AsSha512Mechanism()
			}
			sess, msg, err := mech.Authenticate(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			s := NewScramServer(m, fixedLookup("alice", cred))
			var serverErr error
			for i := 0; i < 3; i++ {
				out, done, err := s.Step(msg)
				if err != nil {
					serverErr = err
					break
				}
				clientDone, next, err := sess.Challenge(out)
				if err != nil {
					t.Fatalf("%s %+v: client rejected the server: %v", m.Name, tc, err)
				}
				if done {
					if !clientDone {
						t.Fatalf("%s: server done, client not", m.Name)
					}
					break
				}
				msg = next
			}
			if ok := serverErr == nil; ok != tc.ok {
				t.Fatalf("%s %+v: server error %v", m.Name, tc, serverErr)
			}
			if serverErr != nil && !errors.Is(serverErr, ErrAuthFailed) {
				t.Fatalf("%s %+v: %v is not ErrAuthFailed", m.Name, tc, serverErr)
			}
		}
	}
}

func TestScramRefusesMalformedAndUnsupported(t *testing.T) {
	cred, _ := ScramSHA256.NewCredential("pw", 4096)
	for _, first := range []string{
		"", "n,,", "p=tls-unique,,n=alice,r=abc", "n,,n=alice", "n,,r=abc,n=alice", "n,a=bob,n=alice,r=abc",
		"n,,n=alice,r=abc,tokenauth=true", "n,,n=al=ZZice,r=abc",
	} {
		s := NewScramServer(ScramSHA256, fixedLookup("alice", cred))
		if _, _, err := s.Step([]byte(first)); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("client-first %q: err = %v, want ErrAuthFailed", first, err)
		}
	}
	s := NewScramServer(ScramSHA256, fixedLookup("alice", cred))
	if _, _, err := s.Step([]byte("n,a=alice,n=alice,r=abc")); err != nil {
		t.Fatalf("authzid equal to the user: %v", err)
	}
	if _, _, err := s.Step([]byte("c=biws,r=abc,p=AAAA")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong nonce in client-final: %v", err)
	}
}

func TestSaslNameUnescapes(t *testing.T) {
	got, err := saslName("a=2Cb=3Dc")
	if err != nil || got != "a,b=c" {
		t.Fatalf("saslName = %q, %v", got, err)
	}
}
