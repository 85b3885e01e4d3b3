package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// Settings of a command come from three places. For every flag, the first
// one that has a value wins:
//
//  1. the command line (--data-dir DIR),
//  2. the environment (WEIR_DATA_DIR=DIR: "WEIR_" + the flag name in upper
//     case with '-' replaced by '_'),
//  3. the config file named by --config or WEIR_CONFIG,
//
// and otherwise the flag's default. The config file is either a JSON object
// of scalars or a flat YAML mapping (one "key: value" per line, '#'
// comments); keys are flag names, '_', '.' and '-' interchangeable. Unknown keys
// are an error, so a typo never silently falls back to a default.

// envName is the environment variable that sets flag name.
func envName(flag string) string {
	return "WEIR_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// normalizeKey maps a config-file key to a flag name; '.' counts as '-'
// too, so Kafka property names ("advertised.listeners") name the flags
// that carry them.
func normalizeKey(k string) string {
	return strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(strings.TrimSpace(k)))
}

// applySettings sets every flag of fs not given on the command line from
// the environment or the config file. skip names flags that are not
// settings (--config itself, --help).
func applySettings(fs *pflag.FlagSet, getenv func(string) string, file map[string]string, skip ...string) error {
	skipped := map[string]bool{"help": true}
	for _, s := range skip {
		skipped[s] = true
	}
	for k := range file {
		if f := fs.Lookup(k); f == nil || skipped[k] {
			return fmt.Errorf("config file: unknown setting %q (known: %s)", k, strings.Join(settingNames(fs, skipped), ", "))
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || skipped[f.Name] {
			return
		}
		src, v, ok := "", "", false
		if ev := getenv(envName(f.Name)); ev != "" {
			src, v, ok = "environment variable "+envName(f.Name), ev, true
		} else if fv, found := file[f.Name]; found {
			src, v, ok = "config file key "+f.Name, fv, true
		}
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("%s: invalid value %q: %w", src, v, serr)
		}
	})
	return err
}

func settingNames(fs *pflag.FlagSet, skipped map[string]bool) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !skipped[f.Name] {
			names = append(names, f.Name)
		}
	})
	sort.Strings(names)
	return names
}

// loadConfigFile reads and parses a config file; JSON when the name ends in
// .json or the content starts with '{', flat YAML otherwise.
func loadConfigFile(name string) (map[string]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var m map[string]string
	if strings.EqualFold(filepath.Ext(name), ".json") || bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		m, err = parseJSONConfig(data)
	} else {
		m, err = parseYAMLConfig(data)
	}
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", name, err)
	}
	return m, nil
}

// parseJSONConfig accepts one JSON object whose values are strings,
// numbers or booleans.
func parseJSONConfig(data []byte) (map[string]string, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	out := make(map[string]string, len(raw))
	for k, rv := range raw {
		var v any
		d := json.NewDecoder(bytes.NewReader(rv))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case json.Number:
			s = v.String()
		case bool:
			s = strconv.FormatBool(v)
		default:
			return nil, fmt.Errorf("key %q: value must be a string, number or boolean", k)
		}
		nk := normalizeKey(k)
		if _, dup := out[nk]; dup {
			return nil, fmt.Errorf("key %q given twice", k)
		}
		out[nk] = s
	}
	return out, nil
}

// parseYAMLConfig accepts the flat subset of YAML a settings file needs:
// "key: value" lines, blank lines, '#' comments, a leading "---", and
// single- or double-quoted values. Anything else (nesting, lists,
// multi-line values) is rejected with its line number.
func parseYAMLConfig(data []byte) (map[string]string, error) {
	out := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") || (n == 1 && trimmed == "---") {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return nil, fmt.Errorf("line %d: nested values are not supported (settings are flat key: value lines)", n)
		}
		k, v, ok := strings.Cut(trimmed, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("line %d: expected \"key: value\"", n)
		}
		val, err := yamlScalar(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		nk := normalizeKey(k)
		if _, dup := out[nk]; dup {
			return nil, fmt.Errorf("line %d: key %q given twice", n, k)
		}
		out[nk] = val
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// yamlScalar decodes one flat YAML scalar: quoted (with the quote's
// escaping rules reduced to what settings need) or plain with an optional
// trailing " # comment".
func yamlScalar(v string) (string, error) {
	switch {
	case v == "":
		return "", fmt.Errorf("missing value")
	case v[0] == '"':
		end := strings.LastIndexByte(v, '"')
		if end == 0 {
			return "", fmt.Errorf("unterminated double-quoted value")
		}
		if rest := strings.TrimSpace(v[end+1:]); rest != "" && !strings.HasPrefix(rest, "#") {
			return "", fmt.Errorf("unexpected text after quoted value: %q", rest)
		}
		s, err := strconv.Unquote(v[:end+1])
		if err != nil {
			return "", fmt.Errorf("bad double-quoted value %s: %w", v[:end+1], err)
		}
		return s, nil
	case v[0] == '\'':
		end := strings.LastIndexByte(v, '\'')
		if end == 0 {
			return "", fmt.Errorf("unterminated single-quoted value")
		}
		if rest := strings.TrimSpace(v[end+1:]); rest != "" && !strings.HasPrefix(rest, "#") {
			return "", fmt.Errorf("unexpected text after quoted value: %q", rest)
		}
		return strings.ReplaceAll(v[1:end], "''", "'"), nil
	case v[0] == '[' || v[0] == '{' || v[0] == '|' || v[0] == '>' || v[0] == '&' || v[0] == '*':
		return "", fmt.Errorf("only scalar values are supported, got %q", v)
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v, nil
}
