package text

// The chat templates of docs/design/qwen3-tts-lm.md §2. The official code
// tokenizes the whole templated string; Talkbox encodes only the user's part
// and inserts the template ids by number, so nothing the user types can act as
// a control token. The results equal the official ids except where the
// official tokenizer merges the template's "\n" with newlines at the start of
// the text (text starting with "\n" or "\r"): there Talkbox keeps them apart,
// which is also what the fixed slices of the official prompt builder assume.

// AssistantIDs returns the ids of "<|im_start|>assistant\n{text}<|im_end|>\n
// <|im_start|>assistant\n": [im_start, assistant, \n] + T + [im_end, \n,
// im_start, assistant, \n]. The prompt builder takes T = ids[3:len-5].
func (t *Tokenizer) AssistantIDs(text string) ([]int, error) {
	body, err := t.Encode(text)
	if err != nil {
		return nil, err
	}
	m := t.tmpl
	out := make([]int, 0, len(body)+8)
	out = append(out, m.IMStart, m.Assistant, m.Newline)
	out = append(out, body...)
	return append(out, m.IMEnd, m.Newline, m.IMStart, m.Assistant, m.Newline), nil
}

// InstructIDs returns the ids of "<|im_start|>user\n{instruct}<|im_end|>\n";
// every one of them is embedded (CustomVoice 1.7B style, VoiceDesign voice).
func (t *Tokenizer) InstructIDs(instruct string) ([]int, error) {
	return t.wrap(t.tmpl.User, instruct)
}

// RefTextIDs returns the ids of "<|im_start|>assistant\n{ref}<|im_end|>\n",
// the reference transcript of a Base ICL clone (content R = ids[3:len-2]).
func (t *Tokenizer) RefTextIDs(ref string) ([]int, error) {
	return t.wrap(t.tmpl.Assistant, ref)
}

func (t *Tokenizer) wrap(role int, s string) ([]int, error) {
	body, err := t.Encode(s)
	if err != nil {
		return nil, err
	}
	m := t.tmpl
	out := make([]int, 0, len(body)+5)
	out = append(out, m.IMStart, role, m.Newline)
	out = append(out, body...)
	return append(out, m.IMEnd, m.Newline), nil
}
