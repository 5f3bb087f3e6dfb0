package proc

import (
	"os"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	line := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 100 0 0\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 3.25 {
		t.Errorf("cpu = %v, want 3.25 (325 ticks)", got)
	}
	if _, err := parseStatCPU([]byte("1 (x) S 1 2")); err == nil {
		t.Error("short line accepted")
	}
}

func TestParseVmHWM(t *testing.T) {
	got, err := parseVmHWM([]byte("Name:\tx\nVmPeak:\t  9999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n"))
	if err != nil || got != 2048*1024 {
		t.Errorf("got %d, %v", got, err)
	}
	if _, err := parseVmHWM([]byte("Name:\tx\n")); err == nil {
		t.Error("missing VmHWM accepted")
	}
}

func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if s.PeakRSSBytes <= 0 || s.CPUSeconds < 0 {
		t.Errorf("implausible reading %+v", s)
	}
}
