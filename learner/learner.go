// Package learner turns trajectory shards into better LoRA adapters: it
// reads shards, groups rows and computes AT-GRPO advantages (atgrpo),
// evaluates the policy loss (loss) on a GoMLX model (model), steps the
// optimiser, and exports adapters in PEFT layout (adapter).
//
// The training loop is built by the learner issue; this file holds the
// experiment config section.
package learner

import "github.com/troupe-rl/troupe/internal/config"

// Config is the "learner:" section of an experiment config.
type Config struct {
	// Device is cpu (GoMLX pure-Go backend) or cuda (XLA with the PJRT CUDA plugin). Default cpu.
	Device string `yaml:"device"`
	// Policies is shared (one adapter for all roles) or per-role. Default per-role.
	Policies string `yaml:"policies"`
	// LR is the AdamW learning rate. Default 1e-5.
	LR float64 `yaml:"lr"`
	// LoRARank is the adapters' rank r. Default 16.
	LoRARank int `yaml:"lora_rank"`
	// LoRAAlpha is the adapters' scaling numerator. Default 32.
	LoRAAlpha float64 `yaml:"lora_alpha"`
}

// SetDefaults fills the documented defaults.
func (c *Config) SetDefaults() {
	c.Device = "cpu"
	c.Policies = "per-role"
	c.LR = 1e-5
	c.LoRARank = 16
	c.LoRAAlpha = 32
}

// Validate checks the section.
func (c *Config) Validate() error {
	switch {
	case c.Device != "cpu" && c.Device != "cuda":
		return config.Errorf("device", "must be cpu or cuda, got %q", c.Device)
	case c.Policies != "shared" && c.Policies != "per-role":
		return config.Errorf("policies", "must be shared or per-role, got %q", c.Policies)
	case !(c.LR > 0 && c.LR < 1):
		return config.Errorf("lr", "must be in (0, 1), got %v", c.LR)
	case c.LoRARank < 1:
		return config.Errorf("lora_rank", "must be ≥ 1, got %d", c.LoRARank)
	case !(c.LoRAAlpha > 0):
		return config.Errorf("lora_alpha", "must be > 0, got %v", c.LoRAAlpha)
	}
	return nil
}
