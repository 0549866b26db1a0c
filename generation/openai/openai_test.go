package openai

import (
	"encoding/json"
	"math"
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
	body, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "text": "hello", "token_ids": ids[:8], "prompt_token_ids": ids,
		"logprobs": map[string]any{"token_logprobs": []float64{-1.25, -0.5, -3.125, -7, -0.001, -2.5, -1, -4.75}}}}})
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

// TestLogprobList checks the fast logprob decoder against encoding/json.
func TestLogprobList(t *testing.T) {
	for _, in := range []string{
		`[]`, `[0]`, `[-1.5, -0.25e-3, null]`, ` [ -3 ,-9999.0 ] `, `[null]`, `null`,
		`[1,]`, `[,1]`, `[1 2]`, `["1"]`, `[01]`, `[1.]`, `[-]`, `[nan]`, `[[1]]`, `{}`, `[1e999]`,
	} {
		var want []*float64
		werr := json.Unmarshal([]byte(in), &want)
		var got logprobList
		gerr := json.Unmarshal([]byte(in), &got)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%s: got %v, %v; encoding/json %v", in, got, gerr, werr)
			continue
		}
		if werr != nil {
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: got %v, want %d values", in, got, len(want))
			continue
		}
		for i, w := range want {
			if (w == nil) != math.IsNaN(got[i]) || (w != nil && *w != got[i]) {
				t.Errorf("%s: [%d] got %v", in, i, got[i])
			}
		}
	}
}
