package hub

import (
	"reflect"
	"testing"
)

func TestFnmatch(t *testing.T) {
	// Expected values are what Python's fnmatch.fnmatchcase returns.
	cases := []struct {
		name, pattern string
		want          bool
	}{
		{"model.safetensors", "*.safetensors", true},
		{"sub/model.safetensors", "*.safetensors", true}, // "*" crosses "/"
		{"model.safetensors", "*.bin", false},
		{"config.json", "config.json", true},
		{"Config.json", "config.json", false}, // case-sensitive on POSIX
		{"a.bin", "?.bin", true},
		{"ab.bin", "?.bin", false},
		{"model-00001-of-00002.safetensors", "model-0000[0-9]-of-*", true},
		{"model-0000x-of-2", "model-0000[0-9]-of-*", false},
		{"x.txt", "[!a]*", true},
		{"a.txt", "[!a]*", false},
		{"]x", "[]]x", true},
		{"[x", "[x", true}, // unclosed "[" is a literal
		{"onnx/model.onnx", "onnx/*", true},
		{"", "*", true},
		{"abc", "a*b*c", true},
		{"abcbd", "a*b*d", true},
		{"abcbe", "a*b*d", false},
		{"a-c", "[a-]c", false},
		{"-c", "[a-]c", true},
	}
	for _, c := range cases {
		if got := Fnmatch(c.name, c.pattern); got != c.want {
			t.Errorf("Fnmatch(%q, %q) = %v, want %v", c.name, c.pattern, got, c.want)
		}
	}
}

func TestFilter(t *testing.T) {
	files := []string{"README.md", "config.json", "model.safetensors", "onnx/model.onnx", "pytorch_model.bin"}
	cases := []struct {
		name          string
		allow, ignore []string
		want          []string
	}{
		{"none", nil, nil, files},
		{"allow", []string{"*.json", "*.safetensors"}, nil, []string{"config.json", "model.safetensors"}},
		{"ignore", nil, []string{"*.bin", "onnx/"}, []string{"README.md", "config.json", "model.safetensors"}},
		{"both", []string{"*"}, []string{"*.md"}, []string{"config.json", "model.safetensors", "onnx/model.onnx", "pytorch_model.bin"}},
		{"folder", []string{"onnx/"}, nil, []string{"onnx/model.onnx"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Filter(files, c.allow, c.ignore); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Filter = %v, want %v", got, c.want)
			}
		})
	}
}
