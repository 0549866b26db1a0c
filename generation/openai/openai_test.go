package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestTokenIDs checks the fast id decoder against encoding/json.
func TestTokenIDs(t *testing.T) {
	for _, in := range []string{
		`[]`, `[0]`, `[1,2,3]`, ` [ 1 , 2 ,3 ] `, "[\n7,\t8\r]", `[2147483647]`, `null`,
		`[2147483648]`, `[-1]`, `[1.5]`, `[1e3]`, `[01]`, `[1,]`, `[,1]`, `[1 2]`, `["1"]`, `[1]x`, `{}`, `[99999999999999999999]`,
	} {
		var want []int32
		werr := json.Unmarshal([]byte(in), &want)
		var got tokenIDs
		gerr := json.Unmarshal([]byte(in), &got)
		if (werr == nil) != (gerr == nil) || (werr == nil && !reflect.DeepEqual([]int32(got), want)) {
			t.Errorf("%s: got %v, %v; encoding/json %v, %v", in, got, gerr, want, werr)
		}
	}
}

func BenchmarkDecodeResponse(b *testing.B) {
	ids := make([]int32, 527)
	for i := range ids {
		ids[i] = int32(i * 97 % 151000)
	}
	body, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "text": "hello", "token_ids": ids[:8], "prompt_token_ids": ids}}})
	b.ReportAllocs()
	for b.Loop() {
		var cr completionResponse
		if err := json.Unmarshal(body, &cr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResponseReflect(b *testing.B) {
	ids := make([]int32, 527)
	for i := range ids {
		ids[i] = int32(i * 97 % 151000)
	}
	body, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "text": "hello", "token_ids": ids[:8], "prompt_token_ids": ids}}})
	b.ReportAllocs()
	for b.Loop() {
		var cr struct {
			Choices []struct {
				Index     int     `json:"index"`
				Text      string  `json:"text"`
				TokenIDs  []int32 `json:"token_ids"`
				PromptIDs []int32 `json:"prompt_token_ids"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &cr); err != nil {
			b.Fatal(err)
		}
	}
}
