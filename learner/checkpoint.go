package learner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/troupe-rl/troupe/internal/atomicfile"
	"github.com/troupe-rl/troupe/internal/hf"
	"github.com/troupe-rl/troupe/learner/adapter"
)

// Checkpoint layout, one folder per step, written under a temporary name
// and renamed into place (see adapter.WriteDirAtomic):
//
//	<root>/step-000042/state.json                      step, consumed shards, per-policy optimiser step
//	<root>/step-000042/<policy>/adapter_config.json     PEFT adapter (float32, exact)
//	<root>/step-000042/<policy>/adapter_model.safetensors
//	<root>/step-000042/<policy>/optimizer.safetensors   AdamW m and v (float32, exact)
const checkpointVersion = 1

var stepDir = regexp.MustCompile(`^step-(\d{6,})$`)

type checkpointState struct {
	Version   int                    `json:"version"`
	Step      int                    `json:"step"`
	Consumed  []string               `json:"consumed"`
	Policies  map[string]policyState `json:"policies"`
	BaseModel string                 `json:"base_model"`
	SavedAt   time.Time              `json:"saved_at"`
}

type policyState struct {
	OptSteps int `json:"opt_steps"`
}

// Checkpoint writes the learner's state to <root>/step-<step>/ atomically,
// removes checkpoints beyond keep_checkpoints (oldest first) and returns
// the folder.
func (l *Learner) Checkpoint(root string) (string, error) {
	final := filepath.Join(root, fmt.Sprintf("step-%06d", l.step))
	if _, err := os.Stat(final); err == nil {
		return final, nil // this step is already saved
	}
	st := checkpointState{Version: checkpointVersion, Step: l.step, Consumed: l.consumed, Policies: map[string]policyState{},
		BaseModel: l.model.Source, SavedAt: time.Now().UTC()}
	if st.Consumed == nil {
		st.Consumed = []string{}
	}
	err := adapter.WriteDirAtomic(final, func(tmp string) error {
		for _, name := range l.names {
			p := l.policies[name]
			st.Policies[name] = policyState{OptSteps: p.opt.T}
			dir := filepath.Join(tmp, name)
			if err := hf.WriteAdapter(dir, p.lora.Adapter(l.model.Source)); err != nil {
				return fmt.Errorf("learner: checkpoint: %w", err)
			}
			ts := map[string]*hf.Tensor{}
			for i := range p.lora.Data {
				base := fmt.Sprintf("%s.lora_%s", p.lora.Modules[i/2], "AB"[i%2:i%2+1])
				ts[base+".exp_avg"] = &hf.Tensor{Shape: p.lora.Shapes[i], Data: p.opt.M[i]}
				ts[base+".exp_avg_sq"] = &hf.Tensor{Shape: p.lora.Shapes[i], Data: p.opt.V[i]}
			}
			if err := hf.WriteSafetensors(filepath.Join(dir, "optimizer.safetensors"), ts,
				map[string]string{"opt_steps": strconv.Itoa(p.opt.T)}, hf.DtypeF32); err != nil {
				return fmt.Errorf("learner: checkpoint: %w", err)
			}
		}
		data, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return fmt.Errorf("learner: checkpoint: %w", err)
		}
		return atomicfile.WriteFile(filepath.Join(tmp, "state.json"), append(data, '\n'), 0o644)
	})
	if err != nil {
		return "", err
	}
	steps, err := checkpointSteps(root)
	if err != nil {
		return final, err
	}
	for len(steps) > l.cfg.KeepCheckpoints {
		if err := os.RemoveAll(filepath.Join(root, fmt.Sprintf("step-%06d", steps[0]))); err != nil {
			return final, fmt.Errorf("learner: pruning checkpoints: %w", err)
		}
		steps = steps[1:]
	}
	return final, nil
}

func checkpointSteps(root string) ([]int, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("learner: %w", err)
	}
	var steps []int
	for _, e := range ents {
		if m := stepDir.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			n, _ := strconv.Atoi(m[1])
			steps = append(steps, n)
		}
	}
	sort.Ints(steps)
	return steps, nil
}

// LatestCheckpoint returns the newest checkpoint folder under root, or ""
// when there is none.
func LatestCheckpoint(root string) (string, error) {
	steps, err := checkpointSteps(root)
	if err != nil || len(steps) == 0 {
		return "", err
	}
	return filepath.Join(root, fmt.Sprintf("step-%06d", steps[len(steps)-1])), nil
}

// restore loads a checkpoint written by Checkpoint into l, whose policies
// and LoRA layout must match.
func (l *Learner) restore(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return fmt.Errorf("learner: resume: %w", err)
	}
	var st checkpointState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("learner: resume: %s/state.json: %w", dir, err)
	}
	if st.Version != checkpointVersion {
		return fmt.Errorf("learner: resume: %s: checkpoint version %d, want %d", dir, st.Version, checkpointVersion)
	}
	var names []string
	for n := range st.Policies {
		names = append(names, n)
	}
	sort.Strings(names)
	if !slices.Equal(names, l.names) {
		return fmt.Errorf("learner: resume: %s holds policies %v, the config implies %v", dir, names, l.names)
	}
	for _, name := range l.names {
		p := l.policies[name]
		pdir := filepath.Join(dir, name)
		lora, err := adapter.Load(pdir, l.model.Config)
		if err != nil {
			return fmt.Errorf("learner: resume: %w", err)
		}
		if lora.Config.Rank != p.lora.Config.Rank || lora.Config.Alpha != p.lora.Config.Alpha || !slices.Equal(lora.Modules, p.lora.Modules) {
			return fmt.Errorf("learner: resume: %s: adapter r=%d alpha=%v targets %v differ from the config's r=%d alpha=%v targets %v",
				pdir, lora.Config.Rank, lora.Config.Alpha, lora.Config.Targets, p.lora.Config.Rank, p.lora.Config.Alpha, p.lora.Config.Targets)
		}
		ts, _, err := hf.ReadSafetensors(filepath.Join(pdir, "optimizer.safetensors"))
		if err != nil {
			return fmt.Errorf("learner: resume: %w", err)
		}
		opt := NewAdamW(lora.Data, l.cfg.Beta1, l.cfg.Beta2, l.cfg.AdamEps, l.cfg.WeightDecay)
		opt.T = st.Policies[name].OptSteps
		for i := range lora.Data {
			base := fmt.Sprintf("%s.lora_%s", lora.Modules[i/2], "AB"[i%2:i%2+1])
			m, v := ts[base+".exp_avg"], ts[base+".exp_avg_sq"]
			if m == nil || v == nil || len(m.Data) != len(lora.Data[i]) || len(v.Data) != len(lora.Data[i]) {
				return fmt.Errorf("learner: resume: %s/optimizer.safetensors: state of %s missing or misshapen", pdir, base)
			}
			opt.M[i], opt.V[i] = m.Data, v.Data
		}
		p.lora, p.opt = lora, opt
	}
	l.step = st.Step
	l.consumed = st.Consumed
	return nil
}

// Export writes every policy's adapter as version under root in PEFT
// layout (<root>/<policy>/v000042/) and returns the folders by policy.
func (l *Learner) Export(root string, version int) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range l.names {
		dir, err := adapter.Export(root, name, version, l.policies[name].lora, l.model.Source)
		if err != nil {
			return nil, err
		}
		out[name] = dir
	}
	return out, nil
}
