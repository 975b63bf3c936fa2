package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check writes each history to a file, runs the checker on them with
// --html, and returns its exit code, its messages and the HTML (if written).
func check(t *testing.T, histories ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	html := filepath.Join(dir, "out.html")
	args := []string{"--timeout", "10s", "--html", html}
	for i, text := range histories {
		path := filepath.Join(dir, "h"+string(rune('0'+i)))
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	page, err := os.ReadFile(html)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return code, stdout.String() + stderr.String(), string(page)
}

func expectLinearizable(t *testing.T, histories ...string) {
	t.Helper()
	code, out, page := check(t, histories...)
	if code != exitLinearizable {
		t.Fatalf("exit %d, expected %d (linearizable): %s", code, exitLinearizable, out)
	}
	if page != "" {
		t.Fatalf("a linearizable history wrote a visualization")
	}
}

// expectViolation: exit 1, the message names key, and the HTML shows it.
func expectViolation(t *testing.T, key string, histories ...string) {
	t.Helper()
	code, out, page := check(t, histories...)
	if code != exitNotLinearizable {
		t.Fatalf("exit %d, expected %d (not linearizable): %s", code, exitNotLinearizable, out)
	}
	if !strings.Contains(out, "key "+key) {
		t.Fatalf("the message does not name key %s: %s", key, out)
	}
	if !strings.Contains(page, "<html") || !strings.Contains(page, "client") {
		t.Fatalf("no visualization was written (%d bytes)", len(page))
	}
}

func TestStaleReadIsCaught(t *testing.T) {
	// a is overwritten by b, which returned before the search began; the
	// search still returns a. Key k1 is fine, so the message must name k2.
	expectViolation(t, "k2", `
a 1 k1 insert x ok 0 10
a 2 k2 insert a ok 20 30
a 3 k2 insert b ok 40 50
`, `
b 1 k1 search - x 15 25
b 2 k2 search - a 60 70
`)
}

func TestOverlappingOperationsMayTakeEffectInEitherOrder(t *testing.T) {
	expectLinearizable(t, `
a 1 k insert a ok 0 100
a 2 k delete - ok 110 200
`, `
b 1 k search - not-found 50 60
b 2 k search - a 70 120
b 3 k search - not-found 150 160
`)
}

func TestTheTablesSemantics(t *testing.T) {
	// insert is an upsert; update and delete of an absent key: not-found.
	expectLinearizable(t, `
a 1 k update u not-found 0 1
a 2 k delete - not-found 2 3
a 3 k insert a ok 4 5
a 4 k insert b ok 6 7
a 5 k search - b 8 9
a 6 k update c ok 10 11
a 7 k search - c 12 13
a 8 k delete - ok 14 15
a 9 k search - not-found 16 17
`)
	expectViolation(t, "k", "a 1 k update u ok 0 1\n")
	expectViolation(t, "k", "a 1 k delete - ok 0 1\n")
	expectViolation(t, "k", "a 1 k insert a ok 0 1\na 2 k update b not-found 2 3\n")
	expectViolation(t, "k", "a 1 k insert a ok 0 1\na 2 k delete - ok 2 3\na 3 k search - a 4 5\n")
	expectViolation(t, "k", "a 1 k search - a 0 1\n")
}

func TestAnOperationWithoutResponseMayTakeEffectAnyTimeAfterItsCall(t *testing.T) {
	writer := `
a 1 k insert a ok 0 10
a 2 k insert b ? 20 -
`
	// The insert of b, whose client died, took effect before the second
	// search, or never.
	expectLinearizable(t, writer, `
b 1 k search - a 30 40
b 2 k search - b 50 60
b 3 k search - b 70 80
`)
	expectLinearizable(t, writer, "b 1 k search - a 30 40\nb 2 k search - a 50 60\n")
	// It cannot take effect twice, nor before it was invoked.
	expectViolation(t, "k", writer, "b 1 k search - b 30 40\nb 2 k search - a 50 60\n")
	expectViolation(t, "k", writer, "b 1 k search - b 5 15\n")
}

func TestTheResponseCompletesTheInvocation(t *testing.T) {
	expectLinearizable(t, `
a 1 k insert a ? 0 -
a 1 k insert a ok 0 10
a 2 k delete - ? 20 -
a 2 k delete - ok 20 30
`, "b 1 k search - not-found 40 50\n")
	// Completed, the delete can no longer be left out.
	expectViolation(t, "k", `
a 1 k insert a ok 0 10
a 2 k delete - ? 20 -
a 2 k delete - ok 20 30
`, "b 1 k search - a 40 50\n")
}

func TestMalformedHistoriesAreRejected(t *testing.T) {
	for _, text := range []string{
		"a 1 k insert a ok 0\n",                        // a field missing
		"a 1 k upsert a ok 0 1\n",                      // unknown kind
		"a 1 k insert - ok 0 1\n",                      // no value
		"a 1 k insert a not-found 0 1\n",               // an insert never returns not-found
		"a 1 k search - x 5 1\n",                       // returns before its call
		"a 1 k search - ? 0 1\n",                       // no output, but a return time
		"a 1 k search - x 0 1\na 1 k search - y 2 3\n", // the same operation twice
		"a 1 k rmw x a+1 0 1\n",                        // an rmw takes no value
		"a 1 k rmw - ok 0 1\n",                         // an rmw returns the value it wrote
	} {
		code, out, _ := check(t, text)
		if code != exitUsage {
			t.Errorf("%q: exit %d, expected %d: %s", text, code, exitUsage, out)
		}
	}
	if code, _, _ := check(t); code != exitUsage {
		t.Errorf("no history: exit %d, expected %d", code, exitUsage)
	}
}

func TestBumpCountsUpATrailingNumber(t *testing.T) {
	for in, want := range map[string]string{
		"w1:5:3":   "w1:5:3+1",
		"w1:5:3+1": "w1:5:3+2",
		"a+9":      "a+10",
		"a+":       "a++1",
		"a+01":     "a+01+1", // not a plain number: a new counter
		"":         "+1",
	} {
		if got := Bump(in); got != want {
			t.Errorf("Bump(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadModifyWrite(t *testing.T) {
	// Two rmws in a row each bump the value; one that saw the key absent
	// changed nothing.
	expectLinearizable(t, `
a 1 k rmw - not-found 0 10
a 2 k insert x ok 20 30
a 3 k rmw - x+1 40 50
a 4 k rmw - x+2 60 70
a 5 k search - x+2 80 90
`)
	// Two concurrent rmws must not both bump the same value: one of them
	// was lost.
	expectViolation(t, "k", `
a 1 k insert x ok 0 10
a 2 k rmw - x+1 20 50
`, `
b 1 k rmw - x+1 25 45
b 2 k search - x+1 60 70
`)
	// An rmw over a value that a later insert replaced would write a value
	// nobody reads back: the search after both sees only one order.
	expectViolation(t, "k", `
a 1 k insert x ok 0 10
a 2 k insert y ok 20 30
a 3 k rmw - x+1 40 50
`)
	// Without a response, it may have taken effect, or not.
	expectLinearizable(t, `
a 1 k insert x ok 0 10
a 2 k rmw - ? 20 -
`, `
b 1 k search - x+1 40 50
`)
	expectLinearizable(t, `
a 1 k insert x ok 0 10
a 2 k rmw - ? 20 -
`, `
b 1 k search - x 40 50
`)
}
