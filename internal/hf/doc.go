// Package hf reads and writes the Hugging Face model-folder formats that
// troupe's embedded engine and learner share, so that both see exactly the
// same model:
//
//   - config.json for Qwen2/Qwen3 and Llama decoders ([ModelConfig]);
//   - safetensors files, single or sharded with model.safetensors.index.json
//     ([ReadSafetensors], [WriteSafetensors], [LoadWeights]), with F32, BF16
//     and F16 tensors widened to float32 on read;
//   - the tensor names of those architectures ([LayerWeight] and friends);
//   - PEFT LoRA adapters: adapter_config.json and adapter_model.safetensors
//     with PEFT's tensor names ([AdapterConfig], [ReadAdapter],
//     [WriteAdapter]), which vLLM and PEFT load unchanged.
//
// Errors about the files' content implement BadInput() bool (true), which the
// CLI maps to exit code 2; they name the file and, where there is one, the
// tensor or key.
package hf

import "fmt"

// FormatError is a malformed or unsupported model or adapter file.
type FormatError struct {
	File string // the file at fault
	What string // what is wrong, naming the key or tensor
	Err  error  // underlying cause, if any
}

func (e *FormatError) Error() string {
	s := "hf: " + e.File + ": " + e.What
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *FormatError) Unwrap() error { return e.Err }

// BadInput marks the error as the user's input (exit code 2).
func (e *FormatError) BadInput() bool { return true }

func formatErr(file string, err error, format string, args ...any) error {
	return &FormatError{File: file, What: fmt.Sprintf(format, args...), Err: err}
}
