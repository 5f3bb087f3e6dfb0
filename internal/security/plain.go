package security

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// ParsePlain splits a SASL PLAIN message (RFC 4616: [authzid] NUL authcid NUL passwd). As in
// Kafka, an authorization id other than the user is refused.
func ParsePlain(msg []byte) (user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", authFailed("malformed PLAIN message")
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" {
		return "", "", authFailed("PLAIN message without user or password")
	}
	if authzid != "" && authzid != user {
		return "", "", authFailed("authorization id %q differs from user %q", authzid, user)
	}
	return user, password, nil
}

// PlainUsers checks PLAIN logins against a file of `user=password` lines (Java properties
// syntax without escapes: '#' and '!' start comments, blank lines are skipped). The file is read
// again when its modification time or size changes, so users are added or removed without a
// restart; when a changed file cannot be read, the last good contents stay in force.
type PlainUsers struct {
	path string

	mu      sync.Mutex
	users   map[string]string
	modTime time.Time
	size    int64
	// failed is the modification time and size of a changed file that could not be used, so
	// that its error is reported once, not at every login.
	failedMod  time.Time
	failedSize int64
}

// LoadPlainUsers reads the file once; an error here is a configuration error.
func LoadPlainUsers(path string) (*PlainUsers, error) {
	p := &PlainUsers{path: path}
	if err := p.reload(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *PlainUsers) reload() error {
	st, err := os.Stat(p.path)
	if err != nil {
		return err
	}
	if p.users != nil && st.ModTime().Equal(p.modTime) && st.Size() == p.size {
		return nil
	}
	if p.users != nil && st.ModTime().Equal(p.failedMod) && st.Size() == p.failedSize {
		return nil // already reported
	}
	b, err := os.ReadFile(p.path)
	if err == nil {
		var users map[string]string
		if users, err = parseUsers(b); err == nil {
			p.users, p.modTime, p.size = users, st.ModTime(), st.Size()
			return nil
		}
		err = fmt.Errorf("%s: %w", p.path, err)
	}
	p.failedMod, p.failedSize = st.ModTime(), st.Size()
	return err
}

func parseUsers(b []byte) (map[string]string, error) {
	users := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		user, pw, ok := strings.Cut(line, "=")
		user, pw = strings.TrimSpace(user), strings.TrimSpace(pw)
		if !ok || user == "" || pw == "" {
			return nil, fmt.Errorf("line %d: expected user=password", n)
		}
		users[user] = pw
	}
	return users, sc.Err()
}

// Verify checks a PLAIN message and returns the user it authenticates. reloadErr reports, once
// per change, a users file that changed but could not be read (the previous contents were used).
func (p *PlainUsers) Verify(msg []byte) (user string, reloadErr error, err error) {
	user, password, err := ParsePlain(msg)
	if err != nil {
		return "", nil, err
	}
	p.mu.Lock()
	reloadErr = p.reload()
	want, ok := p.users[user]
	p.mu.Unlock()
	if !ok {
		return "", reloadErr, authFailed("unknown user %q", user)
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(password)) != 1 {
		return "", reloadErr, authFailed("wrong password for user %q", user)
	}
	return user, reloadErr, nil
}
