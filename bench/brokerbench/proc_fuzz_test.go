package main

import "testing"

// The /proc parsers read text from the kernel; whatever they are given,
// they return a value or an error, never panic, and never report negative
// figures.

func FuzzParseStatCPU(f *testing.F) {
	f.Add([]byte("1234 (weird ) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 12345 1000 200\n"))
	f.Add([]byte("1 (x) S"))
	f.Add([]byte(")))"))
	f.Add([]byte("1 (x) S 1 1 1 0 -1 0 0 0 0 0 -5 1 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseStatCPU(b)
		if err == nil && v < 0 {
			t.Fatalf("negative cpu %v", v)
		}
	})
}

func FuzzParseStatusRSS(f *testing.F) {
	f.Add([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"))
	f.Add([]byte("VmRSS:\t1 kB"))
	f.Add([]byte("VmRSS: -1 kB\nVmHWM: 1 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cur, peak, err := parseStatusRSS(b)
		if err == nil && (cur < 0 || peak < 0) {
			t.Fatalf("negative rss %d %d", cur, peak)
		}
	})
}
