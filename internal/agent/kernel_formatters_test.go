package agent

import (
	"encoding/json"
	"maps"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"github.com/hutchdev/hutch/internal/runtime/agentclient"
)

// The display formatters of kernel_formatters.py, run by Debian's python
// (the one the python template has) with matplotlib and pandas.

// debianPython returns /usr/bin/python3, skipping the test when it lacks
// one of modules.
func debianPython(t *testing.T, modules ...string) string {
	t.Helper()
	const python = "/usr/bin/python3"
	for _, m := range modules {
		if err := exec.Command(python, "-c", "import "+m).Run(); err != nil {
			t.Skipf("needs Debian's %s with %s (apt-get install python3-ipykernel python3-matplotlib python3-pandas)", python, m)
		}
	}
	return python
}

// chartsHarness runs each case's code (argv[2], a JSON object of name to
// code) on a fresh figure with matplotlib's Agg backend, and prints the
// chart of the figure each left, by case.
const chartsHarness = `
import json, runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
formatters = runpy.run_path(sys.argv[1])
charts = {}
for name, code in json.loads(sys.argv[2]).items():
    plt.close("all")
    exec(code, {"plt": plt})
    charts[name] = formatters["figure_chart"](plt.gcf())
print(json.dumps(charts, allow_nan=False))
`

func TestKernelFormattersCharts(t *testing.T) {
	python := debianPython(t, "matplotlib")
	tests := []struct {
		name, code string
		want       string // the chart, or as much of it as is checked (see matchJSON)
	}{{
		name: "line",
		code: `plt.plot([1, 2, 3], [1, 4, 9], label="squares"); plt.plot([1, 2], [0, 1])
plt.title("Growth"); plt.xlabel("time (s)"); plt.ylabel("distance [m]")`,
		want: `{"type": "line", "title": "Growth", "x_label": "time (s)", "y_label": "distance [m]", "x_unit": "s", "y_unit": "m",
			"x_scale": "linear", "y_scale": "linear",
			"elements": [{"label": "squares", "points": [[1, 1], [2, 4], [3, 9]]}, {"label": "", "points": [[1, 0], [2, 1]]}]}`,
	}, {
		name: "scatter, with a fitted line",
		code: `plt.scatter([1, 2], [3, 4], label="dots"); plt.plot([1, 2], [3, 4])`,
		want: `{"type": "scatter", "title": "", "x_label": "", "x_unit": null,
			"elements": [{"label": "dots", "points": [[1, 3], [2, 4]]}]}`,
	}, {
		name: "bar",
		code: `plt.bar(["a", "b"], [3, 5], label="sales"); plt.bar(["a", "b"], [1, 2], bottom=[3, 5])`,
		want: `{"type": "bar", "x_label": "",
			"elements": [{"label": "a", "value": 3, "group": "sales"}, {"label": "b", "value": 5, "group": "sales"},
				{"label": "a", "value": 1, "group": ""}, {"label": "b", "value": 2, "group": ""}]}`,
	}, {
		name: "horizontal bars",
		code: `plt.barh(["x", "y"], [1.5, 2])`,
		want: `{"type": "bar", "elements": [{"label": "x", "value": 1.5, "group": ""}, {"label": "y", "value": 2, "group": ""}]}`,
	}, {
		name: "pie",
		code: `plt.pie([1, 3], labels=["x", "y"]); plt.title("Share")`,
		want: `{"type": "pie", "title": "Share", "elements": [{"label": "x", "angle": 90, "radius": 1}, {"label": "y", "angle": 270, "radius": 1}]}`,
	}, {
		name: "box and whisker",
		code: `plt.boxplot([[1, 2, 3, 4, 5, 20], [2, 3, 4]], patch_artist=True); plt.xticks([1, 2], ["g", "h"]); plt.ylabel("weight (kg)")`,
		want: `{"type": "box_and_whisker", "y_label": "weight (kg)", "y_unit": "kg", "elements": [
			{"label": "g", "min": 1, "first_quartile": 2.25, "median": 3.5, "third_quartile": 4.75, "max": 5, "outliers": [20]},
			{"label": "h", "min": 2, "first_quartile": 2.5, "median": 3, "third_quartile": 3.5, "max": 4, "outliers": []}]}`,
	}, {
		name: "horizontal box",
		code: `plt.boxplot([[1, 2, 3, 4, 5]], patch_artist=True, vert=False)`,
		want: `{"type": "box_and_whisker", "elements": [{"label": "1", "min": 1, "first_quartile": 2, "median": 3, "third_quartile": 4, "max": 5, "outliers": []}]}`,
	}, {
		name: "dates",
		code: `import datetime as dt
plt.plot([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 3)], [1, 2])`,
		want: `{"type": "line", "x_scale": "datetime", "y_scale": "linear",
			"elements": [{"label": "", "points": [["2024-01-01T00:00:00", 1], ["2024-01-03T00:00:00", 2]]}]}`,
	}, {
		name: "categories",
		code: `plt.plot(["mon", "tue"], [1, 2])`,
		want: `{"type": "line", "x_scale": "categorical", "x_ticks": ["mon", "tue"], "x_tick_labels": ["mon", "tue"],
			"elements": [{"label": "", "points": [["mon", 1], ["tue", 2]]}]}`,
	}, {
		name: "log scale",
		code: `plt.plot([1, 10, 100], [1, 2, 3]); plt.xscale("log")`,
		want: `{"type": "line", "x_scale": "log", "x_ticks": [1, 10, 100]}`,
	}, {
		name: "several axes",
		code: `fig, (a, b) = plt.subplots(1, 2); a.plot([1, 2]); b.bar(["x"], [1]); b.set_title("right"); fig.suptitle("Both")`,
		want: `{"type": "superchart", "title": "Both", "elements": [{"type": "line"}, {"type": "bar", "title": "right"}]}`,
	}, {
		name: "an image",
		code: `plt.imshow([[1, 2], [3, 4]])`,
		want: `{"type": "unknown", "title": "", "elements": []}`,
	}, {
		name: "blank",
		code: `plt.figure()`,
		want: `{}`,
	}}
	cases := map[string]string{}
	for _, tt := range tests {
		cases[tt.name] = tt.code
	}
	arg, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, "-c", chartsHarness, "kernel_formatters.py", string(arg)).Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderrOf(err))
	}
	var charts map[string]any
	if err := json.Unmarshal(out, &charts); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want any
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			got := charts[tt.name]
			if msg := matchJSON(got, want, "chart"); msg != "" {
				b, _ := json.Marshal(got)
				t.Errorf("%s\nchart: %s", msg, b)
			}
			chart, _ := got.(map[string]any)
			if typ := chart["type"]; typ == "line" || typ == "scatter" {
				for _, k := range []string{"x_ticks", "x_tick_labels", "y_ticks", "y_tick_labels"} {
					ticks, ok := chart[k].([]any)
					if !ok || len(ticks) == 0 {
						t.Errorf("%s: %v", k, chart[k])
					}
				}
			}
		})
	}
}

// matchJSON says how got differs from want, "" when it does not: objects
// need want's keys only ({} needs {}), arrays the same length, numbers
// agree to 1e-9.
func matchJSON(got, want any, at string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(w) == 0 && len(g) != 0 {
			return at + ": got " + describeJSON(got) + ", want " + describeJSON(want)
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			gv, ok := g[k]
			if !ok {
				return at + "." + k + ": missing"
			}
			if msg := matchJSON(gv, w[k], at+"."+k); msg != "" {
				return msg
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return at + ": got " + describeJSON(got) + ", want " + describeJSON(want)
		}
		for i := range w {
			if msg := matchJSON(g[i], w[i], at+"["+strconv.Itoa(i)+"]"); msg != "" {
				return msg
			}
		}
		return ""
	case float64:
		if g, ok := got.(float64); ok && math.Abs(g-w) <= 1e-9*max(1, math.Abs(w)) {
			return ""
		}
	default:
		if got == want {
			return ""
		}
	}
	return at + ": got " + describeJSON(got) + ", want " + describeJSON(want)
}

func describeJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// registerHarness registers the formatters in an IPython shell before
// matplotlib or pandas is imported, and formats what argv[2] holds.
const registerHarness = `
import json, runpy, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
runpy.run_path(sys.argv[1])["register"](shell)
imported = sorted(m for m in ("matplotlib", "pandas", "numpy") if m in sys.modules)
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
fig = plt.figure()
plt.plot([1, 2])
frame = pd.DataFrame({"a": [1, 2], "b": ["x", None], "c": [1.5, float("nan")], "d": pd.to_datetime(["2024-01-01", None])})
out = {"imported": imported}
for name, obj in (("figure", fig), ("frame", frame), ("int", 1)):
    data, _ = shell.display_formatter.format(obj)
    out[name] = {k: v for k, v in data.items() if k.startswith("e2b/") or k == "text/plain"}
print(json.dumps(out, allow_nan=False))
`

func TestKernelFormattersRegister(t *testing.T) {
	python := debianPython(t, "IPython", "matplotlib", "pandas")
	out, err := exec.Command(python, "-c", registerHarness, "kernel_formatters.py").Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderrOf(err))
	}
	var got, want any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := json.Unmarshal([]byte(`{
		"imported": [],
		"figure": {"text/plain": "<Figure size 640x480 with 1 Axes>", "e2b/chart": {"type": "line"}},
		"frame": {"e2b/data": {"a": [1, 2], "b": ["x", null], "c": [1.5, null], "d": ["2024-01-01T00:00:00", null]}},
		"int": {"text/plain": "1"}
	}`), &want); err != nil {
		t.Fatal(err)
	}
	if msg := matchJSON(got, want, "formats"); msg != "" {
		t.Errorf("%s\ngot: %s", msg, out)
	}
	if m := got.(map[string]any)["int"].(map[string]any); len(m) != 1 {
		t.Errorf("an int has formats of its own: %v", m)
	}
}

// A formatter that fails adds nothing, and says why on the kernel's
// stderr, not in the cell.
func TestKernelFormattersQuiet(t *testing.T) {
	python := debianPython(t)
	out, err := exec.Command(python, "-c", `
import runpy, sys
f = runpy.run_path(sys.argv[1])["_quietly"]("e2b/chart", lambda obj: 1 / 0)
print(f(object()))
`, "kernel_formatters.py").CombinedOutput()
	if err != nil || string(out) != "hutch: no e2b/chart for a object: ZeroDivisionError('division by zero')\nNone\n" {
		t.Errorf("got %q, %v", out, err)
	}
}

// In a python context, plt.show() gives one display_data with the
// figure's text, its PNG and its chart; a DataFrame's value has its
// data; the formatters leave no name in the user's namespace.
func TestPythonContextCharts(t *testing.T) {
	debianPython(t, "ipykernel", "matplotlib", "pandas")
	a := startAgent(t)
	c, err := a.client.CreateContext(t.Context(), agentclient.NewContext{Language: "python", Env: map[string]string{"PATH": "/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	r := runIn(t, a, c.ID, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()", 0)
	if r.err != nil || len(r.results) != 1 || r.end.ExecutionCount != 1 {
		t.Fatalf("plt.show(): %+v", r)
	}
	res := r.results[0]
	formats := slices.Sorted(maps.Keys(res.Data))
	if res.Main || !slices.Equal(formats, []string{"e2b/chart", "image/png", "text/plain"}) {
		t.Errorf("plt.show(): main %v, formats %v", res.Main, formats)
	}
	var chart struct {
		Type, Title string
		Elements    []struct{ Points [][2]float64 }
	}
	if err := json.Unmarshal(res.Data["e2b/chart"], &chart); err != nil || chart.Type != "line" || chart.Title != "squares" ||
		len(chart.Elements) != 1 || !slices.Equal(chart.Elements[0].Points, [][2]float64{{1, 1}, {2, 4}, {3, 9}}) {
		t.Errorf("chart %s: %v", res.Data["e2b/chart"], err)
	}
	var text string
	if err := json.Unmarshal(res.Data["text/plain"], &text); err != nil || text != "<Figure size 640x480 with 1 Axes>" {
		t.Errorf("text: %s", res.Data["text/plain"])
	}

	r = runIn(t, a, c.ID, "import pandas as pd\npd.DataFrame({'a': [1, 2]})", 0)
	if len(r.results) != 1 || !r.results[0].Main || string(r.results[0].Data["e2b/data"]) != `{"a":[1,2]}` || r.results[0].Data["text/html"] == nil {
		t.Errorf("a DataFrame: %+v", r.results)
	}
	if r := runIn(t, a, c.ID, "[n for n in list(globals()) + dir(__builtins__) if 'hutch' in n.lower()]", 0); r.main() != "[]" {
		t.Errorf("names the formatters left: %s", r.main())
	}
}
