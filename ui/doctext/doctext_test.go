package doctext

import (
	"strings"
	"testing"
)

func TestMarkdownToProse(t *testing.T) {
	src := `---
title: Notes
---
# A Title

Some **bold** and *italic* and _under_ text with ` + "`code`" + `,
continued [a link](https://example.com/x) and ![a cat](cat.png).

## Steps ##

- first item
* second item!
1. third [ref link][r]
- [x] done task

> A quoted line.

` + "```go\nfunc main() { fmt.Println(\"#no\") }\n```" + `

---

| Name | Age |
|------|----:|
| Ann  | 30  |

Heading two
-----------

Escaped \*stars\* and <b>html</b> and <https://example.com> end.

[r]: https://example.com/ref
`
	want := "A Title.\n\n" +
		"Some bold and italic and under text with code, continued a link and a cat.\n\n" +
		"Steps.\n\nfirst item.\n\nsecond item!\n\nthird ref link.\n\ndone task.\n\n" +
		"A quoted line.\n\n" +
		"Name, Age.\n\nAnn, 30.\n\n" +
		"Heading two.\n\n" +
		"Escaped *stars* and html and end."
	got := Markdown(src)
	if got != want {
		t.Fatalf("got:\n%s\n\nwant:\n%s", got, want)
	}
	for _, sym := range []string{"#", "**", "`", "](", "|", "---", "http", "func main"} {
		if strings.Contains(got, sym) {
			t.Errorf("%q left in the prose", sym)
		}
	}
}

// Underscores and asterisks inside words are not emphasis; a plain text
// file keeps its symbols.
func TestMarkdownKeepsWordsAndTxtIsPlain(t *testing.T) {
	if got := Markdown("snake_case_name and 2*3*4 stay"); got != "snake_case_name and 2*3*4 stay" {
		t.Errorf("got %q", got)
	}
	got, err := Load("notes.txt", []byte("\xef\xbb\xbf# not a heading\r\n*as is*\r\n"))
	if err != nil || got != "# not a heading\n*as is*\n" {
		t.Errorf("txt: %q, %v", got, err)
	}
	got, err = Load("README.MD", []byte("# Hi\r\n"))
	if err != nil || got != "Hi." {
		t.Errorf("md: %q, %v", got, err)
	}
	if _, err := Load("bad.txt", []byte{0xff, 0xfe, 'a'}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("invalid UTF-8: %v", err)
	}
}
