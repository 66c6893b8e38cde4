// chart-render renders a Helm chart without helm: text/template with sprig and Helm's own
// functions, values merged as helm merges them, values.schema.json validation, and output as
// `helm template` writes it. Built with Debian's Go and its packaged libraries only.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"github.com/xeipuuv/gojsonschema"
	yaml3 "gopkg.in/yaml.v3"
	"sigs.k8s.io/yaml"
)

const usage = `chart-render: render a Helm chart without helm

usage: chart-render [flags] CHART_DIR

  -f, --values FILE      a values file merged over the chart's values.yaml (repeatable)
  --set a.b=c[,x=y]      a value merged last (repeatable; true/false/null/integers are typed)
  --set-string a.b=c     like --set, the value always a string
  --name NAME            release name (default "reverser")
  --namespace NS         release namespace (default "reverser")
  --include-crds         write the chart's crds/ first
  --notes                write the rendered NOTES.txt instead of the manifests
  --kube-version V       .Capabilities.KubeVersion (default "v1.30.0")
  --api-versions LIST    comma-separated extra .Capabilities.APIVersions
  --fake-secrets         deterministic output for tests: generated keys, certificates and
                         random strings become fixed, labelled placeholders
  --skip-schema          do not validate values against values.schema.json
  -o, --output FILE      write here instead of stdout

The manifests are one YAML stream ordered as helm template orders them (by kind, then by
template). Exit status: 0 rendered, 1 a render or schema error, 2 a usage error.
`

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type options struct {
	chartDir    string
	valueFiles  multiFlag
	sets        multiFlag
	setStrings  multiFlag
	name        string
	namespace   string
	includeCRDs bool
	notes       bool
	kubeVersion string
	apiVersions string
	fakeSecrets bool
	skipSchema  bool
	output      string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("chart-render", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&o.valueFiles, "f", "")
	fs.Var(&o.valueFiles, "values", "")
	fs.Var(&o.sets, "set", "")
	fs.Var(&o.setStrings, "set-string", "")
	fs.StringVar(&o.name, "name", "reverser", "")
	fs.StringVar(&o.namespace, "namespace", "reverser", "")
	fs.BoolVar(&o.includeCRDs, "include-crds", false, "")
	fs.BoolVar(&o.notes, "notes", false, "")
	fs.StringVar(&o.kubeVersion, "kube-version", "v1.30.0", "")
	fs.StringVar(&o.apiVersions, "api-versions", "", "")
	fs.BoolVar(&o.fakeSecrets, "fake-secrets", false, "")
	fs.BoolVar(&o.skipSchema, "skip-schema", false, "")
	fs.StringVar(&o.output, "o", "", "")
	fs.StringVar(&o.output, "output", "", "")
	help := fs.Bool("help", false, "")
	fs.BoolVar(help, "h", false, "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "chart-render: %v\n\n%s", err, usage)
		return 2
	}
	if *help {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "chart-render: want exactly one CHART_DIR, got %d\n\n%s", fs.NArg(), usage)
		return 2
	}
	o.chartDir = fs.Arg(0)
	out, err := render(o)
	if err != nil {
		fmt.Fprintf(stderr, "chart-render: %v\n", err)
		return 1
	}
	if o.output != "" {
		if err := os.WriteFile(o.output, []byte(out), 0o644); err != nil {
			fmt.Fprintf(stderr, "chart-render: %v\n", err)
			return 1
		}
		return 0
	}
	io.WriteString(stdout, out)
	return 0
}

// ---- the chart ---------------------------------------------------------------------------

type chart struct {
	dir       string
	meta      map[string]interface{}
	values    map[string]interface{}
	schema    []byte
	templates map[string]string // "<chart>/templates/x.yaml" -> text
	crds      map[string]string // "<chart>/crds/x.yaml" -> text
	files     files
}

func loadChart(dir string) (*chart, error) {
	c := &chart{dir: dir, templates: map[string]string{}, crds: map[string]string{}, files: files{}}
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("not a chart: %v", err)
	}
	if err := yaml.Unmarshal(raw, &c.meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %v", err)
	}
	name, _ := c.meta["name"].(string)
	if name == "" {
		return nil, errors.New("Chart.yaml: name is required")
	}
	c.values = map[string]interface{}{}
	if raw, err := os.ReadFile(filepath.Join(dir, "values.yaml")); err == nil {
		if err := yaml.Unmarshal(raw, &c.values); err != nil {
			return nil, fmt.Errorf("values.yaml: %v", err)
		}
		if c.values == nil {
			c.values = map[string]interface{}{}
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "values.schema.json")); err == nil {
		c.schema = raw
	}
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			c.templates[name+"/"+rel] = string(data)
		case strings.HasPrefix(rel, "crds/"):
			c.crds[name+"/"+rel] = string(data)
			c.files[rel] = data
		case rel == "Chart.yaml" || rel == "values.yaml" || rel == "values.schema.json":
		default:
			c.files[rel] = data
		}
		return nil
	})
	return c, err
}

// files is .Files: the chart's files outside templates/.
type files map[string][]byte

func (f files) Get(name string) string      { return string(f[name]) }
func (f files) GetBytes(name string) []byte { return f[name] }
func (f files) Lines(name string) []string {
	return strings.Split(strings.TrimRight(string(f[name]), "\n"), "\n")
}
func (f files) Glob(pattern string) files {
	out := files{}
	for name, data := range f {
		if ok, _ := path.Match(pattern, name); ok || globDeep(pattern, name) {
			out[name] = data
		}
	}
	return out
}

// globDeep gives "**" the meaning helm's Glob gives it: any number of path segments.
func globDeep(pattern, name string) bool {
	if !strings.Contains(pattern, "**") {
		return false
	}
	re := regexp.QuoteMeta(pattern)
	re = strings.ReplaceAll(re, `\*\*`, `.*`)
	re = strings.ReplaceAll(re, `\*`, `[^/]*`)
	re = strings.ReplaceAll(re, `\?`, `[^/]`)
	ok, _ := regexp.MatchString("^"+re+"$", name)
	return ok
}

func (f files) names() []string {
	var n []string
	for k := range f {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func (f files) AsConfig() string {
	m := map[string]string{}
	for _, k := range f.names() {
		m[path.Base(k)] = string(f[k])
	}
	return toYAML(m)
}

func (f files) AsSecrets() string {
	m := map[string]string{}
	for _, k := range f.names() {
		m[path.Base(k)] = base64.StdEncoding.EncodeToString(f[k])
	}
	return toYAML(m)
}

// ---- values ------------------------------------------------------------------------------

// mergeValues merges src over dst as helm does: maps merge key by key, anything else replaces,
// and null removes the key.
func mergeValues(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// parseSet turns "a.b=c,d[0]=e" into values. Backslash escapes '.', ',' and '='.
func parseSet(expr string, asString bool) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	for _, pair := range splitEscaped(expr, ',') {
		if pair == "" {
			continue
		}
		kv := splitEscaped(pair, '=')
		if len(kv) < 2 {
			return nil, fmt.Errorf("--set %q: want key=value", pair)
		}
		key, val := kv[0], strings.Join(kv[1:], "=")
		var typed interface{} = unescape(val)
		if !asString {
			typed = typeValue(unescape(val))
		}
		if err := setPath(out, splitEscaped(key, '.'), typed); err != nil {
			return nil, fmt.Errorf("--set %q: %v", pair, err)
		}
	}
	return out, nil
}

// splitEscaped splits at sep outside {...} lists, keeping escapes for unescape.
func splitEscaped(s string, sep byte) []string {
	var parts []string
	var cur strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			cur.WriteByte(s[i])
			cur.WriteByte(s[i+1])
			i++
			continue
		}
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
		}
		if s[i] == sep && depth == 0 {
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(s[i])
	}
	return append(parts, cur.String())
}

func unescape(s string) string {
	return regexp.MustCompile(`\\(.)`).ReplaceAllString(s, "$1")
}

func typeValue(s string) interface{} {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && (s == "0" || !strings.HasPrefix(s, "0")) {
		return n
	}
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		var list []interface{}
		for _, item := range splitEscaped(s[1:len(s)-1], ',') {
			list = append(list, typeValue(unescape(item)))
		}
		return list
	}
	return s
}

var indexRe = regexp.MustCompile(`^(.*)\[(\d+)\]$`)

func setPath(m map[string]interface{}, keys []string, v interface{}) error {
	key := unescape(keys[0])
	if g := indexRe.FindStringSubmatch(keys[0]); g != nil {
		name := unescape(g[1])
		idx, _ := strconv.Atoi(g[2])
		list, _ := m[name].([]interface{})
		for len(list) <= idx {
			list = append(list, nil)
		}
		if len(keys) == 1 {
			list[idx] = v
		} else {
			child, ok := list[idx].(map[string]interface{})
			if !ok {
				child = map[string]interface{}{}
			}
			if err := setPath(child, keys[1:], v); err != nil {
				return err
			}
			list[idx] = child
		}
		m[name] = list
		return nil
	}
	if key == "" {
		return errors.New("empty key")
	}
	if len(keys) == 1 {
		m[key] = v
		return nil
	}
	child, ok := m[key].(map[string]interface{})
	if !ok {
		child = map[string]interface{}{}
		m[key] = child
	}
	return setPath(child, keys[1:], v)
}

func readValuesFile(p string) (map[string]interface{}, error) {
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	if out == nil {
		out = map[string]interface{}{}
	}
	return out, nil
}

// userValues are the -f files, then --set, then --set-string, merged in that order.
func userValues(o options) (map[string]interface{}, error) {
	vals := map[string]interface{}{}
	for _, f := range o.valueFiles {
		v, err := readValuesFile(f)
		if err != nil {
			return nil, err
		}
		vals = mergeSparse(vals, v)
	}
	for _, list := range []struct {
		exprs    []string
		asString bool
	}{{o.sets, false}, {o.setStrings, true}} {
		for _, s := range list.exprs {
			v, err := parseSet(s, list.asString)
			if err != nil {
				return nil, err
			}
			vals = mergeSparse(vals, v)
		}
	}
	return vals, nil
}

// mergeSparse merges like mergeValues but keeps nulls, so they can remove chart defaults later.
func mergeSparse(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = mergeSparse(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// validate checks the values against values.schema.json; each error names its field.
func validate(schema []byte, chartName string, values map[string]interface{}) error {
	doc, err := json.Marshal(values)
	if err != nil {
		return err
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(doc))
	if err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	if result.Valid() {
		return nil
	}
	var lines []string
	for _, e := range result.Errors() {
		switch e.Type() {
		case "condition_then", "condition_else", "number_all_of":
			continue // the failing branch's own error names the field
		}
		field := e.Field()
		if e.Type() == "additional_property_not_allowed" {
			prop, _ := e.Details()["property"].(string)
			if field == "(root)" {
				field = prop
			} else {
				field = field + "." + prop
			}
			lines = append(lines, fmt.Sprintf("- %s: unknown field (not in values.schema.json; a typo?)", field))
			continue
		}
		lines = append(lines, fmt.Sprintf("- %s: %s", field, e.Description()))
	}
	sort.Strings(lines)
	return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s",
		chartName, strings.Join(lines, "\n"))
}

// ---- templates ---------------------------------------------------------------------------

type capabilities struct {
	KubeVersion map[string]string
	APIVersions apiVersions
}

type apiVersions []string

func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

var builtinAPIVersions = []string{
	"v1", "apps/v1", "batch/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
	"apiextensions.k8s.io/v1", "coordination.k8s.io/v1", "networking.k8s.io/v1",
	"authentication.k8s.io/v1", "authorization.k8s.io/v1", "autoscaling/v2",
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

type renderer struct {
	tmpl  *template.Template
	funcs template.FuncMap
}

func newRenderer(c *chart, fake bool) (*renderer, error) {
	r := &renderer{}
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["toJson"] = func(v interface{}) string {
		data, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(data)
	}
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["fromYamlArray"] = func(s string) []interface{} {
		var a []interface{}
		if err := yaml.Unmarshal([]byte(s), &a); err != nil {
			a = []interface{}{err.Error()}
		}
		return a
	}
	funcs["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	// No cluster: lookup finds nothing, as under `helm template`.
	funcs["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := r.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := r.tmpl.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Option("missingkey=zero").Parse(text)
		if err != nil {
			return "", fmt.Errorf("tpl: %v", err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("tpl: %v", err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	if fake {
		addFakeSecrets(funcs)
	}
	r.funcs = funcs
	r.tmpl = template.New("chart").Funcs(funcs).Option("missingkey=zero")
	names := make([]string, 0, len(c.templates))
	for n := range c.templates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := r.tmpl.New(n).Parse(c.templates[n]); err != nil {
			return nil, fmt.Errorf("parse %v", err)
		}
	}
	return r, nil
}

// addFakeSecrets makes generated keys, certificates and random strings deterministic, so a
// golden render is stable: each is a placeholder naming what it stands for.
func addFakeSecrets(funcs template.FuncMap) {
	type cert struct{ Cert, Key string }
	pem := func(kind, text string) string {
		return fmt.Sprintf("-----BEGIN %s-----\n%s\n-----END %s-----\n", kind, text, kind)
	}
	names := func(ips, dns []interface{}) string {
		var parts []string
		for _, d := range dns {
			parts = append(parts, fmt.Sprint(d))
		}
		for _, i := range ips {
			parts = append(parts, fmt.Sprint(i))
		}
		return strings.Join(parts, ",")
	}
	counter := map[string]int{}
	fixed := func(kind string, n int, alphabet string) string {
		counter[kind]++
		seed := sha256.Sum256([]byte(fmt.Sprintf("%s-%d-%d", kind, n, counter[kind])))
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteByte(alphabet[int(seed[i%len(seed)])%len(alphabet)])
		}
		return b.String()
	}
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	funcs["genCA"] = func(cn string, days int) cert {
		return cert{pem("CERTIFICATE", "FAKE CA cn="+cn), pem("RSA PRIVATE KEY", "FAKE KEY of CA "+cn)}
	}
	funcs["genSelfSignedCert"] = func(cn string, ips, dns []interface{}, days int) cert {
		return cert{pem("CERTIFICATE", "FAKE self-signed cn="+cn+" names="+names(ips, dns)), pem("RSA PRIVATE KEY", "FAKE KEY of "+cn)}
	}
	funcs["genSignedCert"] = func(cn string, ips, dns []interface{}, days int, ca cert) cert {
		issuer := strings.TrimSpace(strings.Split(ca.Cert, "\n")[1])
		return cert{pem("CERTIFICATE", "FAKE cn="+cn+" names="+names(ips, dns)+" issuer="+issuer),
			pem("RSA PRIVATE KEY", "FAKE KEY of "+cn)}
	}
	funcs["genPrivateKey"] = func(typ string) string { return pem("PRIVATE KEY", "FAKE "+typ+" KEY") }
	funcs["randAlphaNum"] = func(n int) string { return fixed("alnum", n, alnum) }
	funcs["randAlpha"] = func(n int) string { return fixed("alpha", n, alnum[:52]) }
	funcs["randNumeric"] = func(n int) string { return fixed("num", n, "0123456789") }
	funcs["randAscii"] = func(n int) string { return fixed("ascii", n, alnum) }
	funcs["randBytes"] = func(n int) string {
		return base64.StdEncoding.EncodeToString([]byte(fixed("bytes", n, alnum)))
	}
	funcs["uuidv4"] = func() string { return "00000000-0000-4000-8000-000000000000" }
}

func (r *renderer) execute(name string, data interface{}) (string, error) {
	var buf bytes.Buffer
	if err := r.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
}

// ---- output ------------------------------------------------------------------------------

// helm's install order (releaseutil.InstallOrder); other kinds come after these.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList",
	"RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController",
	"ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
	"IngressClass", "Ingress", "APIService",
}

type manifest struct {
	source string
	kind   string
	body   string
	order  int
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

func splitDocs(source, text string) ([]manifest, error) {
	var out []manifest
	for _, doc := range docSep.Split(text, -1) {
		body := strings.TrimSpace(doc)
		if body == "" || onlyComments(body) {
			continue
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(body), &head); err != nil {
			return nil, fmt.Errorf("%s: the rendered YAML does not parse: %v\n%s", source, err, numbered(body))
		}
		var node yaml3.Node
		if err := yaml3.Unmarshal([]byte(body), &node); err != nil {
			return nil, fmt.Errorf("%s: the rendered YAML does not parse: %v\n%s", source, err, numbered(body))
		}
		if head.Kind == "" {
			return nil, fmt.Errorf("%s: a rendered document has no kind:\n%s", source, numbered(body))
		}
		out = append(out, manifest{source: source, kind: head.Kind, body: body})
	}
	return out, nil
}

func onlyComments(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func numbered(body string) string {
	var b strings.Builder
	for i, line := range strings.Split(body, "\n") {
		fmt.Fprintf(&b, "%4d| %s\n", i+1, line)
	}
	return b.String()
}

func kindRank(kind string) int {
	for i, k := range installOrder {
		if k == kind {
			return i
		}
	}
	return len(installOrder)
}

func render(o options) (string, error) {
	c, err := loadChart(o.chartDir)
	if err != nil {
		return "", err
	}
	name := c.meta["name"].(string)
	user, err := userValues(o)
	if err != nil {
		return "", err
	}
	values := mergeValues(c.values, user)
	if c.schema != nil && !o.skipSchema {
		if err := validate(c.schema, name, values); err != nil {
			return "", err
		}
	}
	r, err := newRenderer(c, o.fakeSecrets)
	if err != nil {
		return "", err
	}
	chartMeta := map[string]interface{}{}
	for k, v := range c.meta {
		chartMeta[strings.ToUpper(k[:1])+k[1:]] = v
	}
	kv := strings.TrimPrefix(o.kubeVersion, "v")
	parts := strings.SplitN(kv+"..", ".", 3)
	apis := append(apiVersions{}, builtinAPIVersions...)
	for _, a := range strings.Split(o.apiVersions, ",") {
		if a = strings.TrimSpace(a); a != "" {
			apis = append(apis, a)
		}
	}
	base := map[string]interface{}{
		"Values": values,
		"Chart":  chartMeta,
		"Release": map[string]interface{}{
			"Name": o.name, "Namespace": o.namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": capabilities{
			KubeVersion: map[string]string{"Version": "v" + kv, "GitVersion": "v" + kv, "Major": parts[0], "Minor": parts[1]},
			APIVersions: apis,
		},
		"Files": c.files,
	}
	data := func(tmplName string) map[string]interface{} {
		d := map[string]interface{}{}
		for k, v := range base {
			d[k] = v
		}
		d["Template"] = map[string]interface{}{"Name": tmplName, "BasePath": name + "/templates"}
		return d
	}

	names := make([]string, 0, len(c.templates))
	for n := range c.templates {
		names = append(names, n)
	}
	sort.Strings(names)

	if o.notes {
		notes := name + "/templates/NOTES.txt"
		if _, ok := c.templates[notes]; !ok {
			return "", errors.New("the chart has no templates/NOTES.txt")
		}
		text, err := r.execute(notes, data(notes))
		if err != nil {
			return "", err
		}
		return text, nil
	}

	var all []manifest
	for _, n := range names {
		base := path.Base(n)
		if strings.HasPrefix(base, "_") || base == "NOTES.txt" {
			continue
		}
		text, err := r.execute(n, data(n))
		if err != nil {
			return "", err
		}
		docs, err := splitDocs(n, text)
		if err != nil {
			return "", err
		}
		all = append(all, docs...)
	}
	for i := range all {
		all[i].order = i
	}
	sort.SliceStable(all, func(i, j int) bool {
		ri, rj := kindRank(all[i].kind), kindRank(all[j].kind)
		if ri != rj {
			return ri < rj
		}
		return all[i].order < all[j].order
	})

	var out strings.Builder
	if o.includeCRDs {
		var crdNames []string
		for n := range c.crds {
			crdNames = append(crdNames, n)
		}
		sort.Strings(crdNames)
		for _, n := range crdNames {
			docs, err := splitDocs(n, c.crds[n])
			if err != nil {
				return "", err
			}
			for _, m := range docs {
				fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", m.source, m.body)
			}
		}
	}
	for _, m := range all {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", m.source, m.body)
	}
	return out.String(), nil
}
