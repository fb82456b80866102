// helm_render: renders a Helm chart the way `helm template` does, for the tests on machines
// without helm (Debian has no helm package; it has Go, text/template and sprig): the chart's
// values.yaml merged with --set overrides, .Release, .Chart, .Files.Get, .Template, and the
// functions charts use (sprig's, include, tpl, toYaml, required, fail). Only what our chart
// needs: no subcharts, no lookup, no schema.
//
//	helm_render CHART_DIR [--name NAME] [--namespace NS] [--set key.path=value ...]
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "helm_render: "+format+"\n", a...)
	os.Exit(1)
}

func readYAML(path string) map[string]interface{} {
	b, err := os.ReadFile(path)
	if err != nil {
		die("%v", err)
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		die("%s: %v", path, err)
	}
	return m
}

// a --set value: as helm's strvals, numbers and booleans are typed, the rest are strings
func scalar(s string) interface{} {
	if len(s) >= 2 && s[0] == '{' && s[len(s)-1] == '}' { // a list: {a,b}
		l := []interface{}{}
		if len(s) > 2 {
			for _, e := range strings.Split(s[1:len(s)-1], ",") {
				l = append(l, scalar(e))
			}
		}
		return l
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return int(i)
	}
	if s == "true" || s == "false" {
		return s == "true"
	}
	if s == "null" {
		return nil
	}
	return s
}

func set(values map[string]interface{}, kv string) {
	eq := strings.IndexByte(kv, '=')
	if eq < 1 {
		die("--set %q: want key.path=value", kv)
	}
	path := strings.Split(kv[:eq], ".")
	m := values
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = scalar(kv[eq+1:])
}

type files struct{ root string }

func (f files) Get(name string) string {
	b, err := os.ReadFile(filepath.Join(f.root, name))
	if err != nil {
		return ""
	}
	return string(b)
}

func toYAML(v interface{}) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

func main() {
	if len(os.Args) < 2 {
		die("usage: helm_render CHART_DIR [--name NAME] [--namespace NS] [--set k=v ...]")
	}
	chartDir := os.Args[1]
	name, ns := "release-name", "default"
	values := readYAML(filepath.Join(chartDir, "values.yaml"))
	chart := readYAML(filepath.Join(chartDir, "Chart.yaml"))
	for i := 2; i < len(os.Args); i++ {
		if i+1 >= len(os.Args) {
			die("%s needs a value", os.Args[i])
		}
		switch os.Args[i] {
		case "--name":
			name = os.Args[i+1]
		case "--namespace":
			ns = os.Args[i+1]
		case "--set":
			set(values, os.Args[i+1])
		default:
			die("unknown argument %s", os.Args[i])
		}
		i++
	}
	chartName, _ := chart["name"].(string)
	root := template.New(chartName)
	funcs := sprig.TxtFuncMap()
	funcs["toYaml"] = toYAML
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	funcs["fail"] = func(msg string) (string, error) { return "", fmt.Errorf("%s", msg) }
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err == nil {
			t, err = t.New("tpl").Parse(text)
		}
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return buf.String(), err
	}
	root.Funcs(funcs).Option("missingkey=zero")
	paths, _ := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	sort.Strings(paths)
	base := chartName + "/templates"
	var manifests []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			die("%v", err)
		}
		tname := base + "/" + filepath.Base(p)
		if _, err := root.New(tname).Parse(string(b)); err != nil {
			die("%v", err)
		}
		if !strings.HasPrefix(filepath.Base(p), "_") {
			manifests = append(manifests, tname)
		}
	}
	for _, tname := range manifests {
		data := map[string]interface{}{
			"Values":   values,
			"Release":  map[string]interface{}{"Name": name, "Namespace": ns, "Service": "Helm", "IsInstall": true},
			"Chart":    map[string]interface{}{"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
			"Files":    files{chartDir},
			"Template": map[string]interface{}{"Name": tname, "BasePath": base},
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, data); err != nil {
			die("%v", err)
		}
		out := strings.TrimSpace(buf.String())
		if out == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s\n%s\n", tname, out)
	}
}
