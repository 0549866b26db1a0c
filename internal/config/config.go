// Package config loads YAML experiment configs into plain Go structs.
//
// The config structs live with the packages they configure (envs.Config,
// sandbox.Config, learner.Config, …); this package only knows how to fill
// them. Loading a file is four steps, always in this order:
//
//  1. Defaults: every struct reachable from the root whose pointer implements
//     [Defaulter] gets SetDefaults called, parents before children, so the
//     YAML only needs to say what differs from the defaults.
//  2. Decoding: the file is parsed into a YAML node tree, every key is checked
//     against the struct's yaml tags (an unknown or misspelt key is an error
//     naming the file, the line and the closest known key), and the tree is
//     decoded over the defaults.
//  3. Overrides: "a.b.c=value" strings (from the command line) are applied to
//     the node tree before decoding, with the same key checks; the value is
//     parsed as YAML, so "lr=1e-5", "base_urls=[a, b]" and "name=x" all work.
//  4. Validation: every struct whose pointer implements [Validator] is
//     validated, children before parents. Errors made with [Errorf] name the
//     offending key by its full dotted path and, where the key came from the
//     file, its line.
//
// Every error this package returns is an *[Error], which reports BadInput()
// true: the command line turns it into exit code 2.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Defaulter is implemented by config structs that have non-zero defaults.
// SetDefaults is called on a zero value before the YAML is decoded over it.
type Defaulter interface {
	SetDefaults()
}

// Validator is implemented by config structs that check their own fields.
// Validate is called after decoding and overrides. It should return errors
// made with [Errorf] so that the loader can name the key and its line.
type Validator interface {
	Validate() error
}

// Error is a configuration error: a bad file, key, value or override.
type Error struct {
	File     string // config file, or "" for a struct validated without one
	Line     int    // 1-based line in File, 0 when unknown (e.g. from an override)
	Key      string // dotted key path, e.g. "learner.lr"; may be empty
	Override string // the "key=value" override that caused it, if any
	Msg      string
	Err      error // underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Override != "" {
		fmt.Fprintf(&b, "override %q: ", e.Override)
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// BadInput reports that the error is the user's input, not a failure of
// troupe; the CLI maps it to exit code 2.
func (e *Error) BadInput() bool { return true }

// FieldError is returned by Validate methods (through [Errorf]); the loader
// prefixes Field with the path of the struct being validated.
type FieldError struct {
	Field string // yaml key relative to the struct that reported it
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// BadInput marks validation failures as user errors (exit code 2).
func (e *FieldError) BadInput() bool { return true }

// Errorf returns a validation error for the yaml key field (relative to the
// struct being validated; may be dotted for nested fields).
func Errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Load reads the YAML file at path into cfg (a pointer to a struct), applying
// defaults, overrides ("a.b=value") and validation as the package doc says.
func Load(path string, cfg any, overrides ...string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &Error{File: path, Msg: "cannot read file", Err: err}
	}
	return Decode(path, data, cfg, overrides...)
}

// Decode is Load on bytes; name is used in error messages.
func Decode(name string, data []byte, cfg any, overrides ...string) error {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config: Decode needs a pointer to a struct, got %T", cfg)
	}
	SetDefaults(cfg)

	root, err := parse(name, data)
	if err != nil {
		return err
	}
	origin := map[*yaml.Node]string{}
	for _, ov := range overrides {
		if err := applyOverride(root, ov, origin); err != nil {
			return &Error{File: name, Override: ov, Msg: err.Error()}
		}
	}
	if err := checkKeys(name, root, rv.Elem().Type(), "", origin); err != nil {
		return err
	}
	if len(root.Content) > 0 {
		if err := root.Decode(cfg); err != nil {
			return decodeError(name, err)
		}
	}
	if err := validate(rv, ""); err != nil {
		var fe *pathError
		if errors.As(err, &fe) {
			line := lineOf(root, fe.path)
			return &Error{File: name, Line: line, Key: fe.path, Msg: fe.msg, Err: fe.err}
		}
		return &Error{File: name, Msg: err.Error(), Err: err}
	}
	return nil
}

// Validate runs the validation step alone on an already filled config (for
// configs built in code). Errors name the dotted key.
func Validate(cfg any) error {
	if err := validate(reflect.ValueOf(cfg), ""); err != nil {
		var fe *pathError
		if errors.As(err, &fe) {
			return &Error{Key: fe.path, Msg: fe.msg, Err: fe.err}
		}
		return &Error{Msg: err.Error(), Err: err}
	}
	return nil
}

// ValidateSection is Validate for a config section that sits under the
// dotted key section in an experiment (e.g. "learner"): errors name the
// full key ("learner.lr").
func ValidateSection(section string, cfg any) error {
	if err := validate(reflect.ValueOf(cfg), section); err != nil {
		var fe *pathError
		if errors.As(err, &fe) {
			return &Error{Key: fe.path, Msg: fe.msg, Err: fe.err}
		}
		return &Error{Key: section, Msg: err.Error(), Err: err}
	}
	return nil
}

// Marshal renders a resolved config as YAML (what --print-config prints).
func Marshal(cfg any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	return buf.Bytes(), nil
}

// parse returns the top-level mapping node of a YAML document (an empty
// mapping for an empty file).
func parse(name string, data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, decodeError(name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: root.Line, Msg: "the top level must be a mapping of keys to values"}
	}
	return root, nil
}

// decodeError turns yaml.v3's errors ("yaml: line 3: …", or a TypeError with
// one "line N: …" per problem) into an *Error with the first line number.
func decodeError(name string, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &Error{File: name, Line: line, Msg: msg, Err: err}
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	nodeType        = reflect.TypeFor[yaml.Node]()
)

// fieldsOf maps a struct's yaml keys to field types, following ",inline".
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// checkKeys walks node against type t and reports the first unknown key.
func checkKeys(file string, node *yaml.Node, t reflect.Type, path string, origin map[*yaml.Node]string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if node == nil || t == nodeType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return nil // the decoder reports the type mismatch with its line
		}
		fields := fieldsOf(t)
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			if k.Value == "<<" { // YAML merge key
				continue
			}
			key := join(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				msg := "unknown key"
				if s := closest(k.Value, fields); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", join(path, s))
				}
				return &Error{File: file, Line: k.Line, Key: key, Override: origin[k], Msg: msg}
			}
			if err := checkKeys(file, v, ft, key, origin); err != nil {
				return err
			}
		}
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			if err := checkKeys(file, node.Content[i+1], t.Elem(), join(path, node.Content[i].Value), origin); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if node.Kind != yaml.SequenceNode {
			return nil
		}
		for i, v := range node.Content {
			if err := checkKeys(file, v, t.Elem(), join(path, strconv.Itoa(i)), origin); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// closest returns the known key nearest to k by edit distance, if close.
func closest(k string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := editDistance(k, n); d < bestD {
			best, bestD = n, d
		}
	}
	if bestD <= max(2, len(k)/3) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// lineOf finds the line of the key at a dotted path in the tree (0 if absent).
func lineOf(root *yaml.Node, path string) int {
	node, line := root, 0
	for _, part := range strings.Split(path, ".") {
		if node == nil {
			return line
		}
		switch node.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(node.Content); i += 2 {
				if node.Content[i].Value == part {
					line, next = node.Content[i].Line, node.Content[i+1]
					break
				}
			}
			node = next
		case yaml.SequenceNode:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(node.Content) {
				return line
			}
			node = node.Content[i]
			line = node.Line
		default:
			return line
		}
	}
	return line
}

// SetDefaults calls SetDefaults on cfg and every nested struct (parents
// first, so a parent may set a child's field and the child fills the rest).
func SetDefaults(cfg any) {
	walk(reflect.ValueOf(cfg), func(v reflect.Value) {
		if d, ok := v.Addr().Interface().(Defaulter); ok {
			d.SetDefaults()
		}
	}, nil)
}

// pathError is a validation error located at a dotted key.
type pathError struct {
	path, msg string
	err       error
}

func (e *pathError) Error() string { return e.path + ": " + e.msg }
func (e *pathError) Unwrap() error { return e.err }

// validate runs Validate on nested structs first, then on their parents, and
// returns the first error as a *pathError.
func validate(v reflect.Value, path string) error {
	var first error
	walkPath(v, path, nil, func(v reflect.Value, p string) {
		if first != nil {
			return
		}
		val, ok := v.Addr().Interface().(Validator)
		if !ok {
			return
		}
		if err := val.Validate(); err != nil {
			var fe *FieldError
			var pe *pathError
			var ce *Error
			switch {
			case errors.As(err, &pe):
				first = pe
			case errors.As(err, &ce) && ce.Key != "":
				first = &pathError{path: join(p, ce.Key), msg: ce.Msg, err: err}
			case errors.As(err, &fe):
				first = &pathError{path: join(p, fe.Field), msg: fe.Msg, err: err}
			default:
				first = &pathError{path: p, msg: err.Error(), err: err}
			}
		}
	})
	return first
}

// walk visits every addressable struct value under v: pre before its
// children, post after.
func walk(v reflect.Value, pre, post func(reflect.Value)) {
	var p1 func(reflect.Value, string)
	var p2 func(reflect.Value, string)
	if pre != nil {
		p1 = func(v reflect.Value, _ string) { pre(v) }
	}
	if post != nil {
		p2 = func(v reflect.Value, _ string) { post(v) }
	}
	walkPath(v, "", p1, p2)
}

func walkPath(v reflect.Value, path string, pre, post func(reflect.Value, string)) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		if !v.CanAddr() {
			return
		}
		if pre != nil {
			pre(v, path)
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			sub := path
			if !strings.Contains(opts, "inline") {
				if name == "" {
					name = strings.ToLower(f.Name)
				}
				sub = join(path, name)
			}
			walkPath(v.Field(i), sub, pre, post)
		}
		if post != nil {
			post(v, path)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walkPath(v.Index(i), join(path, strconv.Itoa(i)), pre, post)
		}
	case reflect.Map:
		// Map values are not addressable; configs keep structs in maps only
		// when they need no defaults or validation of their own.
	}
}
