package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseSetTypesValues(t *testing.T) {
	got, err := parseSet(`a.b=1,a.c=true,d=null,e=x\,y,f={p,2},g[1].h=007,k\.l=v`, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{
		"a":   map[string]interface{}{"b": int64(1), "c": true},
		"d":   nil,
		"e":   "x,y",
		"f":   []interface{}{"p", int64(2)},
		"g":   []interface{}{nil, map[string]interface{}{"h": "007"}},
		"k.l": "v",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseSet = %#v, want %#v", got, want)
	}
	s, _ := parseSet("a=1", true)
	if s["a"] != "1" {
		t.Errorf("--set-string a=1 = %#v, want the string", s["a"])
	}
	if _, err := parseSet("novalue", false); err == nil {
		t.Error("--set novalue was accepted")
	}
}

func TestMergeValuesNullRemovesAndMapsMerge(t *testing.T) {
	dst := map[string]interface{}{"a": map[string]interface{}{"x": 1, "y": 2}, "b": []interface{}{1}, "c": 3}
	src := map[string]interface{}{"a": map[string]interface{}{"y": 5}, "b": []interface{}{2}, "c": nil}
	got := mergeValues(dst, src)
	want := map[string]interface{}{"a": map[string]interface{}{"x": 1, "y": 5}, "b": []interface{}{2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merge = %#v, want %#v", got, want)
	}
}

func writeChart(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var testChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\n",
	"values.yaml": "name: x\nlabels: {a: b}\nextra: \"{{ .Release.Name }}-tpl\"\nport: 80\n",
	"values.schema.json": `{"type": "object", "additionalProperties": false, "properties": {
		"name": {"type": "string"}, "labels": {"type": "object"}, "extra": {"type": "string"},
		"port": {"type": "integer"}}}`,
	"files/data.txt":         "hello\n",
	"crds/b.yaml":            "# comment\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: b}\n",
	"templates/_helpers.tpl": `{{- define "demo.name" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}`,
	"templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "demo.name" . }}
  labels:
    {{- toYaml .Values.labels | nindent 4 }}
  annotations:
    extra: {{ tpl .Values.extra . }}
    file: {{ .Files.Get "files/data.txt" | trim }}
    found: {{ lookup "v1" "Secret" "ns" "x" | len | quote }}
    missing: "{{ .Values.nothing }}"
    port: "{{ .Values.port }}"
    version: {{ .Chart.AppVersion }}
`,
	"templates/sa.yaml":   "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {{ .Values.name }}\n  namespace: {{ .Release.Namespace }}\n---\n# only a comment\n",
	"templates/NOTES.txt": "installed {{ .Release.Name }}\n",
}

func TestRenderOrdersLikeHelmTemplate(t *testing.T) {
	dir := writeChart(t, testChart)
	out, err := render(options{chartDir: dir, name: "rel", namespace: "ns", includeCRDs: true, kubeVersion: "v1.30.0"})
	if err != nil {
		t.Fatal(err)
	}
	want := `---
# Source: demo/crds/b.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: b}
---
# Source: demo/templates/sa.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: x
  namespace: ns
---
# Source: demo/templates/deploy.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: rel-demo
  labels:
    a: b
  annotations:
    extra: rel-tpl
    file: hello
    found: "0"
    missing: ""
    port: "80"
    version: 4.5
`
	if out != want {
		t.Errorf("render:\n%s\nwant:\n%s", out, want)
	}
	notes, err := render(options{chartDir: dir, name: "rel", namespace: "ns", notes: true})
	if err != nil || notes != "installed rel\n" {
		t.Errorf("notes = %q, %v", notes, err)
	}
}

func TestSchemaNamesTheField(t *testing.T) {
	dir := writeChart(t, testChart)
	vals := filepath.Join(dir, "typo.yaml")
	os.WriteFile(vals, []byte("nmae: y\n"), 0o644)
	_, err := render(options{chartDir: dir, name: "r", namespace: "n", valueFiles: multiFlag{vals}})
	if err == nil || !strings.Contains(err.Error(), "- nmae: unknown field") {
		t.Errorf("typo: %v", err)
	}
	_, err = render(options{chartDir: dir, name: "r", namespace: "n", sets: multiFlag{"port=http"}})
	if err == nil || !strings.Contains(err.Error(), "- port: Invalid type") {
		t.Errorf("wrong type: %v", err)
	}
}

func TestRequiredFailsAndEnvIsGone(t *testing.T) {
	for text, want := range map[string]string{
		`{{ required "x is required" .Values.x }}`: "x is required",
		`{{ env "HOME" }}`:                         `function "env" not defined`,
		`{{ expandenv "$HOME" }}`:                  `function "expandenv" not defined`,
	} {
		files := map[string]string{"Chart.yaml": "name: demo\n", "templates/a.yaml": text}
		_, err := render(options{chartDir: writeChart(t, files), name: "r", namespace: "n"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}
}

func TestFakeSecretsAreStable(t *testing.T) {
	files := map[string]string{"Chart.yaml": "name: demo\n", "templates/s.yaml": `{{- $ca := genCA "ca" 1 -}}
{{- $c := genSignedCert "svc" nil (list "svc.ns") 1 $ca -}}
apiVersion: v1
kind: Secret
metadata: {name: s}
stringData:
  crt: {{ $c.Cert | quote }}
  pw: {{ randAlphaNum 8 }}
`}
	dir := writeChart(t, files)
	a, err := render(options{chartDir: dir, name: "r", namespace: "n", fakeSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := render(options{chartDir: dir, name: "r", namespace: "n", fakeSecrets: true})
	if a != b || !strings.Contains(a, "FAKE cn=svc names=svc.ns issuer=FAKE CA cn=ca") {
		t.Errorf("fake secrets:\n%s\n%s", a, b)
	}
	real, _ := render(options{chartDir: dir, name: "r", namespace: "n"})
	if !strings.Contains(real, "BEGIN CERTIFICATE") || strings.Contains(real, "FAKE") {
		t.Errorf("real render:\n%s", real)
	}
}

func TestUsageErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "usage:") {
		t.Errorf("--help: %d %q", code, out.String())
	}
	if code := run([]string{"--bogus", "x"}, &out, &errOut); code != 2 {
		t.Errorf("--bogus: exit %d, want 2", code)
	}
	if code := run([]string{t.TempDir()}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "not a chart") {
		t.Errorf("no chart: exit %d %q", code, errOut.String())
	}
}
