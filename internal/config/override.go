package config

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Override is one parsed "a.b.c=value" command-line override.
type Override struct {
	Path  []string   // dotted key path, split; sequence indices are decimal
	Value *yaml.Node // the value, parsed as a YAML flow value
}

// ParseOverride parses "a.b.c=value". Keys are YAML keys (letters, digits,
// '_' and '-'); a numeric part indexes a sequence. The value is parsed as
// YAML, so "x=1e-5" is a number, "x=[a, b]" a list, "x=" an empty string and
// "x='3'" the string 3.
func ParseOverride(s string) (Override, error) {
	key, val, ok := strings.Cut(s, "=")
	if !ok {
		return Override{}, fmt.Errorf("want key=value")
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return Override{}, fmt.Errorf("empty key")
	}
	parts := strings.Split(key, ".")
	for _, p := range parts {
		if p == "" {
			return Override{}, fmt.Errorf("empty part in key %q", key)
		}
		for _, r := range p {
			if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return Override{}, fmt.Errorf("key %q: character %q is not allowed", key, r)
			}
		}
	}
	var doc yaml.Node
	if strings.TrimSpace(val) == "" {
		return Override{Path: parts, Value: &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ""}}, nil
	}
	if err := yaml.Unmarshal([]byte(val), &doc); err != nil {
		return Override{}, fmt.Errorf("value %q is not valid YAML: %s", val, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) != 1 {
		return Override{}, fmt.Errorf("value %q is not one YAML value", val)
	}
	v := doc.Content[0]
	if v.Kind == yaml.AliasNode || v.Anchor != "" {
		return Override{}, fmt.Errorf("value %q: anchors and aliases are not allowed in overrides", val)
	}
	clearLines(v)
	return Override{Path: parts, Value: v}, nil
}

// clearLines zeroes positions: an override's value has no line in the file.
func clearLines(n *yaml.Node) {
	n.Line, n.Column = 0, 0
	for _, c := range n.Content {
		clearLines(c)
	}
}

// applyOverride sets the value at the override's path in the mapping root,
// creating mappings on the way; origin records the key nodes it created so
// that later errors can name the override.
func applyOverride(root *yaml.Node, s string, origin map[*yaml.Node]string) error {
	ov, err := ParseOverride(s)
	if err != nil {
		return err
	}
	node := root
	for i, part := range ov.Path {
		last := i == len(ov.Path)-1
		if node.Kind == yaml.AliasNode {
			node = node.Alias
		}
		if node.Kind == yaml.ScalarNode && node.Tag == "!!null" { // "env:" with nothing under it
			node.Kind, node.Tag, node.Value = yaml.MappingNode, "!!map", ""
		}
		switch node.Kind {
		case yaml.MappingNode:
			var val *yaml.Node
			for j := 0; j+1 < len(node.Content); j += 2 {
				if node.Content[j].Value == part {
					val = node.Content[j+1]
					if last {
						node.Content[j+1] = ov.Value
						origin[node.Content[j]] = s
					}
					break
				}
			}
			if val == nil {
				k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: part}
				origin[k] = s
				val = ov.Value
				if !last {
					val = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				}
				node.Content = append(node.Content, k, val)
			}
			node = val
		case yaml.SequenceNode:
			idx, err := strconv.Atoi(part)
			if err != nil || idx < 0 || idx >= len(node.Content) {
				return fmt.Errorf("%s: index %q out of range (the list has %d items)",
					strings.Join(ov.Path[:i], "."), part, len(node.Content))
			}
			if last {
				node.Content[idx] = ov.Value
			}
			node = node.Content[idx]
		default:
			return fmt.Errorf("%s is a single value, not a section: cannot set %s",
				strings.Join(ov.Path[:i], "."), strings.Join(ov.Path, "."))
		}
	}
	return nil
}
