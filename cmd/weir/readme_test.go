package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMECommands runs every `weir` command line of the README's sh
// blocks (other than serve, which TestServeProcess covers), in order,
// against an in-process broker, so the README's examples cannot rot.
// Commands get their broker from WEIR_BROKERS, as a user's shell would.
func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeWeirCommands(string(readme))
	if len(cmds) < 8 {
		t.Fatalf("found only %d weir commands in README.md sh blocks: %q", len(cmds), cmds)
	}
	t.Setenv("WEIR_BROKERS", startTestBroker(t))
	for _, line := range cmds {
		stdin, args, err := parseREADMELine(line)
		if err != nil {
			t.Fatalf("README line %q: %v", line, err)
		}
		if args[0] == "serve" {
			continue
		}
		out, errOut, code := runCLI(t, stdin, args...)
		if code != 0 {
			t.Fatalf("README command %q: exit %d\nstdout: %s\nstderr: %s", line, code, out, errOut)
		}
		t.Logf("$ %s\n%s", line, out)
	}
}

// readmeWeirCommands returns the lines of ```sh blocks that run weir.
func readmeWeirCommands(md string) []string {
	var out []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && line == "```sh"
		case in && (strings.HasPrefix(line, "weir ") || strings.Contains(line, "| weir ")):
			out = append(out, line)
		}
	}
	return out
}

// parseREADMELine splits a README command line: an optional
// "printf 'TEXT' |" prefix becomes stdin (with \n expanded), the rest is
// "weir ARGS..." with single/double quoting and a trailing # comment.
func parseREADMELine(line string) (stdin string, args []string, err error) {
	words, err := shellWords(line)
	if err != nil {
		return "", nil, err
	}
	if len(words) >= 3 && words[0] == "printf" && words[2] == "|" {
		stdin = strings.ReplaceAll(words[1], `\n`, "\n")
		words = words[3:]
	}
	if len(words) < 2 || words[0] != "weir" {
		return "", nil, fmt.Errorf("not a weir command: %q", words)
	}
	return stdin, words[1:], nil
}

// shellWords is the small subset of sh word splitting the README uses.
func shellWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		have  bool
		quote rune
	)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, have = r, true
		case r == '#' && !have:
			return words, nil // comment to end of line
		case r == ' ' || r == '\t':
			if have {
				words = append(words, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote")
	}
	if have {
		words = append(words, cur.String())
	}
	return words, nil
}
