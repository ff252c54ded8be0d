// helm-render: the subset of `helm template` that deploy/helm/sweeper uses, for machines without a
// helm binary (tests/helm.rs, `make helm-template`). It follows Helm 3's rules where the chart
// can tell the difference:
//   - values: values.yaml, then each -f file, then --set / --set-string, merged like Helm (maps
//     deep-merged, null deletes a key); YAML numbers load as float64, --set integers as int64,
//     "true"/"false" as bools, "null" as nil, like Helm's strvals;
//   - templates: text/template with sprig's TxtFuncMap (minus env/expandenv) and Helm's include,
//     tpl, required, toYaml, fromYaml, fromYamlArray, toJson, fromJson, lookup (always empty);
//     missing keys render as empty, like Helm;
//   - output: each non-empty document as "---\n# Source: <chart>/templates/<file>\n<doc>",
//     ordered by Helm's install order (kind), then file name; CRDs first with --include-crds.
//
// Usage: helm-render [--name NAME] [--namespace NS] [-f values.yaml]... [--set k.p=v]...
//
//	[--set-string k.p=v]... [--include-crds] CHART_DIR
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	// Debian's golang-github-masterminds-sprig-dev is sprig v3, laid out in GOPATH without the
	// /v3 element (built with GO111MODULE=off: scripts/provision-helm-render.sh).
	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
)

type multiFlag []string

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	name, namespace, chartDir := "sweeper", "default", ""
	var valueFiles, sets, setStrings multiFlag
	includeCRDs := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if k := strings.IndexByte(a, '='); k >= 0 && strings.HasPrefix(a, "--") {
				return a[k+1:], nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", a)
			}
			i++
			return args[i], nil
		}
		flag := a
		if k := strings.IndexByte(a, '='); k >= 0 && strings.HasPrefix(a, "--") {
			flag = a[:k]
		}
		var err error
		var v string
		switch flag {
		case "--name":
			v, err = next()
			name = v
		case "-n", "--namespace":
			v, err = next()
			namespace = v
		case "-f", "--values":
			v, err = next()
			valueFiles = append(valueFiles, v)
		case "--set":
			v, err = next()
			sets = append(sets, v)
		case "--set-string":
			v, err = next()
			setStrings = append(setStrings, v)
		case "--include-crds":
			includeCRDs = true
		case "-h", "--help":
			fmt.Println("usage: helm-render [--name NAME] [--namespace NS] [-f values.yaml]... [--set k=v]... [--set-string k=v]... [--include-crds] CHART_DIR")
			return nil
		default:
			if strings.HasPrefix(a, "-") {
				return fmt.Errorf("unknown flag %s", a)
			}
			if chartDir != "" {
				return fmt.Errorf("one chart directory expected, got %s and %s", chartDir, a)
			}
			chartDir = a
		}
		if err != nil {
			return err
		}
	}
	if chartDir == "" {
		return errors.New("no chart directory given")
	}

	chart, err := loadYAMLMap(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return err
	}
	chartName, _ := chart["name"].(string)
	if chartName == "" {
		return errors.New("Chart.yaml: name is required")
	}

	values, err := loadYAMLMap(filepath.Join(chartDir, "values.yaml"))
	if err != nil && !os.IsNotExist(errors.Unwrap(err)) {
		return err
	}
	if values == nil {
		values = map[string]interface{}{}
	}
	for _, f := range valueFiles {
		extra, err := loadYAMLMap(f)
		if err != nil {
			return err
		}
		values = mergeMaps(values, extra)
	}
	for _, s := range sets {
		if err := parseSet(values, s, false); err != nil {
			return fmt.Errorf("--set %s: %w", s, err)
		}
	}
	for _, s := range setStrings {
		if err := parseSet(values, s, true); err != nil {
			return fmt.Errorf("--set-string %s: %w", s, err)
		}
	}
	values = dropNulls(values)

	docs, err := render(chartDir, chartName, chartMeta(chart), name, namespace, values)
	if err != nil {
		return err
	}

	var out bytes.Buffer
	if includeCRDs {
		crds, _ := filepath.Glob(filepath.Join(chartDir, "crds", "*"))
		sort.Strings(crds)
		for _, f := range crds {
			if ext := filepath.Ext(f); ext != ".yaml" && ext != ".yml" && ext != ".json" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			fmt.Fprintf(&out, "---\n# Source: %s/crds/%s\n%s", chartName, filepath.Base(f), b)
			if !bytes.HasSuffix(b, []byte("\n")) {
				out.WriteByte('\n')
			}
		}
	}
	for _, d := range docs {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", d.source, d.content)
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}

// chartMeta is .Chart: Helm exposes Chart.yaml with Go field names (Name, Version, AppVersion, ...).
func chartMeta(chart map[string]interface{}) map[string]interface{} {
	m := map[string]interface{}{}
	for k, v := range chart {
		switch k {
		case "apiVersion":
			m["APIVersion"] = v
		case "kubeVersion":
			m["KubeVersion"] = v
		default:
			m[strings.ToUpper(k[:1])+k[1:]] = v
		}
	}
	for _, k := range []string{"Name", "Version", "AppVersion", "Description", "Type", "Home", "Icon", "KubeVersion"} {
		if _, ok := m[k]; !ok {
			m[k] = ""
		}
	}
	return m
}

func loadYAMLMap(path string) (map[string]interface{}, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return m, nil
}

// mergeMaps merges src over dst like Helm's coalescing: maps deep-merged, other values replaced.
func mergeMaps(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = mergeMaps(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// dropNulls removes keys set to null: in Helm, a null in user values deletes the default.
func dropNulls(m map[string]interface{}) map[string]interface{} {
	for k, v := range m {
		switch t := v.(type) {
		case nil:
			delete(m, k)
		case map[string]interface{}:
			m[k] = dropNulls(t)
		}
	}
	return m
}

// parseSet applies one --set argument: comma-separated key.path=value pairs; "\." and "\," escape.
func parseSet(values map[string]interface{}, arg string, asString bool) error {
	for _, pair := range splitUnescaped(arg, ',') {
		if pair == "" {
			continue
		}
		eq := indexUnescaped(pair, '=')
		if eq < 0 {
			return fmt.Errorf("%q: key=value expected", pair)
		}
		if strings.ContainsAny(pair[:eq], "[]") {
			return fmt.Errorf("%q: list indexes are not supported here; use -f values.yaml", pair)
		}
		keys := splitUnescaped(pair[:eq], '.')
		raw := unescape(pair[eq+1:])
		var val interface{} = raw
		if !asString {
			val = typedVal(raw)
		}
		m := values
		for i, k := range keys {
			k = unescape(k)
			if k == "" {
				return fmt.Errorf("%q: empty key", pair)
			}
			if i == len(keys)-1 {
				m[k] = val
				break
			}
			child, ok := m[k].(map[string]interface{})
			if !ok {
				child = map[string]interface{}{}
				m[k] = child
			}
			m = child
		}
	}
	return nil
}

// typedVal is Helm's strvals typing: bools, null, integers without a leading zero; else a string.
func typedVal(s string) interface{} {
	switch strings.ToLower(s) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if s == "0" {
		return int64(0)
	}
	if len(s) > 0 && s[0] != '0' {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	}
	return s
}

func indexUnescaped(s string, sep byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == sep {
			return i
		}
	}
	return -1
}

// splitUnescaped splits on sep not preceded by a backslash; escapes are kept for unescape.
func splitUnescaped(s string, sep byte) []string {
	var parts []string
	for {
		i := indexUnescaped(s, sep)
		if i < 0 {
			return append(parts, s)
		}
		parts = append(parts, s[:i])
		s = s[i+1:]
	}
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

type doc struct {
	source  string
	kind    string
	content string
}

// Helm's InstallOrder: the order `helm template` prints kinds in (unknown kinds last).
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList",
	"RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController",
	"ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
	"IngressClass", "Ingress", "APIService",
}

var docSeparator = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

type kubeVersion struct {
	Version, Major, Minor string
}

func (k kubeVersion) String() string { return k.Version }

type versionSet []string

// Has is .Capabilities.APIVersions.Has.
func (v versionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

type capabilities struct {
	KubeVersion kubeVersion
	APIVersions versionSet
	HelmVersion map[string]string
}

// chartFiles is Helm's .Files, Get only: a file of the chart by its path, "" when it is missing
// (as Helm returns).
type chartFiles struct{ dir string }

func (f chartFiles) Get(name string) string {
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		return ""
	}
	return string(b)
}

func render(chartDir, chartName string, chart map[string]interface{}, release, namespace string,
	values map[string]interface{}) ([]doc, error) {
	// Every file under templates/, subdirectories included (templates/tests/ holds `helm test`
	// hooks), as Helm loads them; named by their path below the chart.
	tdir := filepath.Join(chartDir, "templates")
	var files []string
	err := filepath.Walk(tdir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)

	root := template.New(chartName)
	root.Option("missingkey=zero")
	funcs := funcMap(root)
	root.Funcs(funcs)
	var names []string
	for _, f := range files {
		base := filepath.Base(f)
		ext := filepath.Ext(base)
		if ext != ".yaml" && ext != ".yml" && ext != ".tpl" && ext != ".txt" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(tdir, f)
		if err != nil {
			return nil, err
		}
		tname := chartName + "/templates/" + filepath.ToSlash(rel)
		if _, err := root.New(tname).Parse(string(b)); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(base, "_") && ext != ".txt" {
			names = append(names, tname)
		}
	}

	top := map[string]interface{}{
		"Values": values,
		"Chart":  chart,
		"Release": map[string]interface{}{
			"Name": release, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": capabilities{
			KubeVersion: kubeVersion{Version: "v1.20.0", Major: "1", Minor: "20"},
			APIVersions: versionSet{"v1", "apps/v1", "rbac.authorization.k8s.io/v1",
				"coordination.k8s.io/v1", "apiextensions.k8s.io/v1", "events.k8s.io/v1"},
			HelmVersion: map[string]string{"Version": "v3"},
		},
		"Files": chartFiles{dir: chartDir},
	}

	var docs []doc
	for _, tname := range names {
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": tname, "BasePath": chartName + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, data); err != nil {
			return nil, err
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		for _, d := range docSeparator.Split(out, -1) {
			if strings.TrimSpace(d) == "" {
				continue
			}
			var head struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(d), &head); err != nil {
				return nil, fmt.Errorf("%s: rendered invalid YAML: %w\n%s", tname, err, d)
			}
			docs = append(docs, doc{source: tname, kind: head.Kind, content: strings.TrimRight(d, "\n")})
		}
	}
	rank := func(kind string) int {
		for i, k := range installOrder {
			if k == kind {
				return i
			}
		}
		return len(installOrder)
	}
	sort.SliceStable(docs, func(i, j int) bool { return rank(docs[i].kind) < rank(docs[j].kind) })
	return docs, nil
}

func funcMap(root *template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	includeDepth := map[string]int{}
	f["include"] = func(name string, data interface{}) (string, error) {
		if includeDepth[name] > 1000 {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		includeDepth[name]++
		defer func() { includeDepth[name]-- }()
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		if _, err := t.New("tpl").Parse(text); err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, "tpl", data); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	f["toYaml"] = func(v interface{}) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["fromYamlArray"] = func(s string) []interface{} {
		a := []interface{}{}
		if err := yaml.Unmarshal([]byte(s), &a); err != nil {
			a = []interface{}{err.Error()}
		}
		return a
	}
	f["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	// helm template has no cluster: lookup finds nothing.
	f["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	return f
}
