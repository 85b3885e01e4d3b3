package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func testFlags() (*pflag.FlagSet, *string, *int32, *bool, *time.Duration) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("config", "", "")
	dir := fs.String("data-dir", "./weir-data", "")
	parts := fs.Int32("default-partitions", 1, "")
	auto := fs.Bool("auto-create-topics", false, "")
	iv := fs.Duration("sync-interval", 0, "")
	return fs, dir, parts, auto, iv
}

func TestParseYAMLConfig(t *testing.T) {
	m, err := parseYAMLConfig([]byte(`---
# weir settings
data-dir: /var/lib/weir   # trailing comment
kafka_addr: "0.0.0.0:9092"
log-level: 'debug'
auto-create-topics: true

sync-interval: 10ms
cluster-id: "a#b"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"data-dir":           "/var/lib/weir",
		"kafka-addr":         "0.0.0.0:9092",
		"log-level":          "debug",
		"auto-create-topics": "true",
		"sync-interval":      "10ms",
		"cluster-id":         "a#b",
	}
	if len(m) != len(want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
}

func TestParseYAMLConfigErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"data-dir:\n  nested: x\n", "line 1: missing value"},
		{"a: 1\n  b: 2\n", "line 2: nested"},
		{"just a line\n", "line 1: expected"},
		{"a: [1, 2]\n", "only scalar"},
		{"a: \"unterminated\n", "unterminated"},
		{"a: 1\nA: 2\n", "given twice"},
		{"a: \"x\" y\n", "unexpected text"},
	} {
		_, err := parseYAMLConfig([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse %q: err %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestParseJSONConfig(t *testing.T) {
	m, err := parseJSONConfig([]byte(`{"data_dir": "/d", "default-partitions": 3, "auto-create-topics": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if m["data-dir"] != "/d" || m["default-partitions"] != "3" || m["auto-create-topics"] != "true" {
		t.Fatalf("got %v", m)
	}
	for _, in := range []string{`[1]`, `{"a": {"b": 1}}`, `{"a": [1]}`, `{"a": null}`, `{"a": 1} {}`, `{"a":1,"A":2}`} {
		if _, err := parseJSONConfig([]byte(in)); err == nil {
			t.Errorf("parse %s: no error", in)
		}
	}
}

func TestSettingsPrecedence(t *testing.T) {
	fs, dir, parts, auto, iv := testFlags()
	if err := fs.Parse([]string{"--data-dir", "/from-flag"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"WEIR_DATA_DIR": "/from-env", "WEIR_DEFAULT_PARTITIONS": "7"}
	file := map[string]string{"data-dir": "/from-file", "default-partitions": "5", "auto-create-topics": "true"}
	if err := applySettings(fs, func(k string) string { return env[k] }, file, "config"); err != nil {
		t.Fatal(err)
	}
	if *dir != "/from-flag" {
		t.Errorf("data-dir = %q: the command line must win", *dir)
	}
	if *parts != 7 {
		t.Errorf("default-partitions = %d: the environment must win over the file", *parts)
	}
	if !*auto {
		t.Error("auto-create-topics not taken from the file")
	}
	if *iv != 0 {
		t.Errorf("sync-interval = %v: unset everywhere must keep the default", *iv)
	}
}

func TestSettingsErrors(t *testing.T) {
	fs, _, _, _, _ := testFlags()
	err := applySettings(fs, func(string) string { return "" }, map[string]string{"data-dri": "/x"}, "config")
	if err == nil || !strings.Contains(err.Error(), `unknown setting "data-dri"`) || !strings.Contains(err.Error(), "data-dir") {
		t.Fatalf("typo in config file: %v", err)
	}
	fs, _, _, _, _ = testFlags()
	err = applySettings(fs, func(string) string { return "" }, map[string]string{"config": "/other"}, "config")
	if err == nil {
		t.Fatal("config file naming another config file was accepted")
	}
	fs, _, _, _, _ = testFlags()
	err = applySettings(fs, func(k string) string {
		if k == "WEIR_DEFAULT_PARTITIONS" {
			return "many"
		}
		return ""
	}, nil, "config")
	if err == nil || !strings.Contains(err.Error(), "WEIR_DEFAULT_PARTITIONS") {
		t.Fatalf("bad env value: %v", err)
	}
	fs, _, _, _, _ = testFlags()
	err = applySettings(fs, func(string) string { return "" }, map[string]string{"sync-interval": "soon"}, "config")
	if err == nil || !strings.Contains(err.Error(), "config file key sync-interval") {
		t.Fatalf("bad file value: %v", err)
	}
}

func TestLoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	y := filepath.Join(dir, "weir.yaml")
	j := filepath.Join(dir, "weir.conf")
	if err := os.WriteFile(y, []byte("data-dir: /y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(j, []byte(" {\"data-dir\": \"/j\"}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := loadConfigFile(y); err != nil || m["data-dir"] != "/y" {
		t.Fatalf("yaml: %v %v", m, err)
	}
	if m, err := loadConfigFile(j); err != nil || m["data-dir"] != "/j" {
		t.Fatalf("json by content: %v %v", m, err)
	}
	if _, err := loadConfigFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("missing file: no error")
	}
}

// FuzzParseConfig: any file content yields settings or an error, never a
// panic, and accepted settings have normalized keys.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"data-dir: /x\n",
		"---\n# c\nkafka_addr: \"0.0.0.0:9092\" # c\nlog-level: 'de''bug'\n",
		"a: [1]\n", "a:\n  b: c\n", "a: \"\\x\"\n", "a: '\n", ":\n", "\n\n",
		`{"data-dir": "/d", "default-partitions": 3, "auto-create-topics": true}`,
		`{"a": {"b": 1}}`, `{"a": 1e400}`, `{`, `{"a":"b"} x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (map[string]string, error){parseYAMLConfig, parseJSONConfig} {
			m, err := parse(data)
			if err != nil {
				continue
			}
			for k := range m {
				if k != normalizeKey(k) {
					t.Fatalf("key %q not normalized", k)
				}
			}
		}
	})
}
