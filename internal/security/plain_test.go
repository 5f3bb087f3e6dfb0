package security

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPlainUsersVerifyAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, []byte("# users\nalice = s3cret\n\n!old\nbob=pw=with=equals\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPlainUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		msg  string
		user string
	}{
		{"\x00alice\x00s3cret", "alice"},
		{"alice\x00alice\x00s3cret", "alice"},
		{"\x00bob\x00pw=with=equals", "bob"},
		{"\x00alice\x00wrong", ""},
		{"\x00carol\x00s3cret", ""},
		{"bob\x00alice\x00s3cret", ""}, // authorization id of another user
		{"\x00alice", ""},
	} {
		user, _, err := p.Verify([]byte(c.msg))
		if c.user == "" {
			if !errors.Is(err, ErrAuthFailed) {
				t.Errorf("%q: user %q err %v, want ErrAuthFailed", c.msg, user, err)
			}
		} else if err != nil || user != c.user {
			t.Errorf("%q: user %q err %v, want %q", c.msg, user, err, c.user)
		}
	}
	// A new file (another size and time) is read at the next login, without a restart.
	if err := os.WriteFile(path, []byte("carol=new-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if user, _, err := p.Verify([]byte("\x00carol\x00new-password")); err != nil || user != "carol" {
		t.Fatalf("after the file changed: %q %v", user, err)
	}
	if _, _, err := p.Verify([]byte("\x00alice\x00s3cret")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("a user removed from the file still logs in: %v", err)
	}
	// A broken file keeps the last good users and reports why.
	os.WriteFile(path, []byte("no equals sign here\n"), 0o600)
	os.Chtimes(path, time.Now().Add(2*time.Hour), time.Now().Add(2*time.Hour))
	user, reloadErr, err := p.Verify([]byte("\x00carol\x00new-password"))
	if err != nil || user != "carol" || reloadErr == nil {
		t.Fatalf("broken file: user %q reloadErr %v err %v; want carol still valid and a reload error", user, reloadErr, err)
	}
	if _, reloadErr, _ := p.Verify([]byte("\x00carol\x00new-password")); reloadErr != nil {
		t.Fatalf("the same broken file reported again: %v", reloadErr)
	}
}
