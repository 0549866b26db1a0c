package parse

import (
	"strings"
	"testing"
)

func TestCode(t *testing.T) {
	for _, tc := range []struct{ in, code, how string }{
		{"```python\nprint(1)\n```", "print(1)\n", "python_block"},
		{"a\n```py\nx=1\n```\nb\n```python\nprint(2)\n```\ntrailing prose", "print(2)\n", "python_block"},
		{"```python\nprint(1)\n```\n```\nplain\n```", "print(1)\n", "python_block"},
		{"```\nprint(3)\n```", "print(3)\n", "block"},
		{"```python\nprint(4)\n", "print(4)\n", "python_block"}, // cut at max tokens
		{"print(5)", "print(5)", "raw"},
		{"  \n", "", ""},
	} {
		code, how := Code(tc.in)
		if code != tc.code || how != tc.how {
			t.Errorf("Code(%q) = %q, %q; want %q, %q", tc.in, code, how, tc.code, tc.how)
		}
	}
}

func TestAnswerAndMoves(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" = error
	}{
		{`#### ["U","R"]`, "[U R]"},
		{`reasoning... #### ['u', 'r']`, "[U R]"},
		{"#### [up, Right, DOWN, left]", "[U R D L]"},
		{"#### U, R, D", "[U R D]"},
		{"#### RRDD", "[R R D D]"},
		{"#### [\"U\",\"R\"] is my final answer.", "[U R]"},
		{"####\n```json\n[\"L\"]\n```", "[L]"},
		{"#### **[\"D\"]**", "[D]"},
		{"#### Final answer: [\"D\", \"D\"]", "[D D]"},
		{"#### [\"U\",\n \"R\"]", "[U R]"},
		{"#### 1 ####  [\"L\"]", "[L]"},
		{"#### [\"X\"]", ""},
		{"#### [\"U\"", ""},
		{"#### the path goes up", ""},
		{"####", ""},
		{"no marker", ""},
	} {
		got := ""
		if p, ok := Answer(tc.in); ok {
			if v, err := List(p); err == nil {
				if ms, err := Moves(v, 100); err == nil {
					var s []string
					for _, m := range ms {
						s = append(s, m.String())
					}
					got = "[" + strings.Join(s, " ") + "]"
				}
			}
		}
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestToolActions(t *testing.T) {
	for _, tc := range []struct{ in, how string }{
		{"**Actions List**: [\"U\"]\n", "actions_list"},
		{"debug\nactions list: ['U']", "actions_list"},
		{"Actions: [\"U\"]", "actions"},
		{"searching...\n[\"U\", \"R\"]\n", "list_line"},
		{"nothing here", ""},
	} {
		_, how, err := ToolActions(tc.in)
		if how != tc.how || (tc.how == "") != (err != nil) {
			t.Errorf("%q: how %q err %v, want %q", tc.in, how, err, tc.how)
		}
	}
}

func TestIntsAndLimits(t *testing.T) {
	v, err := List("[[1, '2', 3.0], (4, 5)]")
	if err != nil {
		t.Fatal(err)
	}
	ints, err := Ints(v)
	if err != nil || len(ints) != 2 || ints[0][1] != 2 || ints[0][2] != 3 || ints[1][1] != 5 {
		t.Fatalf("%v %v", ints, err)
	}
	for _, bad := range []string{"[[1.5]]", strings.Repeat("[", 100), "[" + strings.Repeat("1,", 20000) + "]", "['" + strings.Repeat("x", 2000) + "']"} {
		if _, err := List(bad); err == nil {
			t.Errorf("List(%.20q…) accepted", bad)
		}
	}
	if _, err := Moves(Value{Kind: ListKind, Items: []Value{{Kind: WordKind, Str: strings.Repeat("U", 50)}}}, 10); err == nil {
		t.Error("Moves over max accepted")
	}
}

func FuzzParseCode(f *testing.F) {
	for _, s := range []string{"```python\nx\n```", "```", "``````", "```\n", "a```b```c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		code, how := Code(s)
		if how != "" && !strings.Contains(s, code) {
			t.Fatalf("code %q is not part of the input", code)
		}
	})
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{"#### [\"U\"]", "#### U, R", "####```[1]```", "#### [[1,2],[3,4]]", "#### ('a',)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := Answer(s)
		if !ok {
			return
		}
		v, err := List(p)
		if err != nil {
			return
		}
		Moves(v, 400)
		Ints(v)
	})
}

func FuzzParseToolActions(f *testing.F) {
	for _, s := range []string{"**Actions List**: [\"U\"]", "Actions: [[0,1,2]]", "[1]\n[2", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, _, err := ToolActions(s)
		if err == nil && v.Kind != ListKind {
			t.Fatalf("non-list %v without error", v)
		}
	})
}
