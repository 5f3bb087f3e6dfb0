package topologyplugin

import (
	"errors"
	"fmt"
)

// Kind is how the coordinator treats a failed plugin call.
type Kind uint8

const (
	// KindTransient: the call may succeed later. For Set the coordinator records nothing,
	// extends the group's back-off and asks a member to push again once it expires. Every
	// error that is not marked permanent is transient, including context errors.
	KindTransient Kind = iota
	// KindPermanent: the description will never be accepted at this topology epoch (too
	// large, rejected). For Set the coordinator persists the epoch as failed and stops asking
	// for a description until the group's topology epoch advances.
	KindPermanent
)

func (k Kind) String() string {
	if k == KindPermanent {
		return "permanent"
	}
	return "transient"
}

// kinded is implemented by the two marker types; KindOf finds the outermost one.
type kinded interface {
	error
	topologyKind() Kind
}

// PermanentError marks a failure that will never succeed at this topology epoch. Error
// returns Reason (Err's message when Reason is empty); Unwrap returns Err. For Set the message
// reaches the pushing client in ErrorMessage, so write it for a human and leave internals out.
type PermanentError struct {
	Reason string
	Err    error
}

func (e *PermanentError) Error() string      { return message(e.Reason, e.Err, "permanent failure") }
func (e *PermanentError) Unwrap() error      { return e.Err }
func (e *PermanentError) topologyKind() Kind { return KindPermanent }

func message(reason string, err error, def string) string {
	if reason != "" {
		return reason
	}
	if err != nil {
		return err.Error()
	}
	return def
}

// TransientError marks a failure that may succeed later. Any unmarked error is treated the
// same way; the type exists so that a plugin can say so explicitly, and so that a transient
// error can wrap a cause that is itself marked permanent without being classified as such.
type TransientError struct {
	Reason string
	Err    error
}

func (e *TransientError) Error() string      { return message(e.Reason, e.Err, "transient failure") }
func (e *TransientError) Unwrap() error      { return e.Err }
func (e *TransientError) topologyKind() Kind { return KindTransient }

// Permanent returns a *PermanentError with the given reason.
func Permanent(reason string) error { return &PermanentError{Reason: reason} }

// Permanentf formats like fmt.Errorf (including %w) and marks the result permanent.
func Permanentf(format string, args ...any) error {
	e := fmt.Errorf(format, args...)
	return &PermanentError{Reason: e.Error(), Err: errors.Unwrap(e)}
}

// MarkPermanent marks err permanent, keeping its message; nil stays nil.
func MarkPermanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Transient returns a *TransientError with the given reason.
func Transient(reason string) error { return &TransientError{Reason: reason} }

// Transientf formats like fmt.Errorf (including %w) and marks the result transient.
func Transientf(format string, args ...any) error {
	e := fmt.Errorf(format, args...)
	return &TransientError{Reason: e.Error(), Err: errors.Unwrap(e)}
}

// MarkTransient marks err transient, keeping its message; nil stays nil.
func MarkTransient(err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err}
}

// KindOf classifies a non-nil error: the outermost *PermanentError or *TransientError in its
// chain decides; an error with neither is transient.
func KindOf(err error) Kind {
	var k kinded
	if errors.As(err, &k) {
		return k.topologyKind()
	}
	return KindTransient
}

// IsPermanent reports whether err is classified permanent (see KindOf).
func IsPermanent(err error) bool { return err != nil && KindOf(err) == KindPermanent }

// IsTransient reports whether err is a failure classified transient (see KindOf).
func IsTransient(err error) bool { return err != nil && KindOf(err) == KindTransient }
