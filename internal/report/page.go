package report

// pageHTML is the report template: one self-contained page (inline CSS,
// images as data: URIs, no scripts, no external assets).
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>troupe report{{range .Runs}} · {{.Name}}{{end}}</title>
<style>
:root { --fg:#1d2330; --muted:#5b6475; --line:#dde1e8; --bg:#f6f7f9; --card:#fff; --ok:#0b7a4b; --warn:#a34a00; --accent:#0072b2; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif; color:var(--fg); background:var(--bg); }
main { max-width:1180px; margin:0 auto; padding:24px 28px 60px; }
h1 { font-size:26px; margin:0 0 4px; }
h2 { font-size:20px; margin:36px 0 12px; padding-bottom:6px; border-bottom:2px solid var(--line); }
h3 { font-size:16px; margin:20px 0 8px; }
.muted { color:var(--muted); font-size:13px; }
.cards { display:flex; flex-wrap:wrap; gap:12px; margin:16px 0; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 16px; min-width:150px; }
.card .v { font-size:22px; font-weight:600; }
.card .k { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
table { border-collapse:collapse; background:var(--card); font-size:13.5px; margin:8px 0; }
th, td { border:1px solid var(--line); padding:5px 10px; text-align:left; vertical-align:top; }
th { background:#eef1f5; font-weight:600; }
td.n { text-align:right; font-variant-numeric:tabular-nums; }
ul.checks { list-style:none; padding:0; margin:8px 0; }
ul.checks li { padding:7px 12px; margin:6px 0; border-radius:6px; border-left:4px solid; background:var(--card); }
ul.checks li.warn { border-color:var(--warn); }
ul.checks li.ok { border-color:var(--ok); }
.badge { display:inline-block; font-size:11px; font-weight:600; padding:1px 7px; border-radius:10px; color:#fff; }
.badge.ok { background:var(--ok); } .badge.bad { background:var(--warn); } .badge.n { background:#6b7280; }
.grid { display:grid; grid-template-columns:1fr; gap:18px; }
@media (min-width:1100px) { .grid { grid-template-columns:1fr 1fr; } }
figure { margin:0; background:var(--card); border:1px solid var(--line); border-radius:8px; padding:8px; }
figure img { width:100%; height:auto; display:block; }
figcaption { font-size:12.5px; color:var(--muted); padding:4px 6px 2px; }
details { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:8px 14px; margin:10px 0; }
summary { cursor:pointer; font-weight:600; }
.step { border-top:1px solid var(--line); padding:8px 0; }
.step .h { font-size:13px; color:var(--muted); }
.step .h b { color:var(--fg); }
pre { white-space:pre-wrap; word-break:break-word; background:#f3f4f7; border:1px solid var(--line); border-radius:6px; padding:8px 10px; font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; margin:6px 0; max-height:420px; overflow:auto; }
pre.prompt { background:#fbfaf3; }
.others td { font-size:12.5px; }
</style>
</head>
<body>
<main>
{{if .Compare}}
<h1>troupe · comparison of {{len .Runs}} runs</h1>
<div class="muted">generated {{.Generated}} · runs: {{range $i, $r := .Runs}}{{if $i}}, {{end}}{{$r.Name}} ({{$r.Dir}}){{end}}</div>

<h2>Ablation table</h2>
<table>
<tr><th>run</th><th>before training pass@1</th><th>final eval pass@1</th><th>change (points)</th><th>best eval pass@1</th><th>final eval reward</th><th>last train reward</th><th>learner steps</th><th>tokens trained</th><th>wall time</th><th>evals</th></tr>
{{range .Views}}<tr><td>{{.Name}}</td>
<td class="n">{{if .Start}}{{pct .Start.SuccessRate}}{{else}}–{{end}}</td>
{{if .Final}}<td class="n">{{pct .Final.SuccessRate}} <span class="muted">@{{.Final.Step}}</span></td><td class="n">{{or .Gain "–"}}</td><td class="n">{{pct .Best.SuccessRate}} <span class="muted">@{{.Best.Step}}</span></td><td class="n">{{fmtF .Final.RewardMean}}</td>{{else}}<td>–</td><td>–</td><td>–</td><td>–</td>{{end}}
<td class="n">{{or .TrainReward "–"}}</td><td class="n">{{.Steps}}</td><td class="n">{{.Tokens}}</td><td class="n">{{.Wall}}</td><td class="n">{{len .Metrics.Eval}}</td></tr>
{{end}}</table>

<h2>Diagnostics</h2>
{{range .Views}}<h3>{{.Name}}</h3>
<ul class="checks">{{range .Checks}}<li class="{{.Level}}">{{.Text}}</li>{{end}}</ul>
{{end}}
{{else}}{{with index .Views 0}}
<h1>troupe run · {{.Name}}</h1>
<div class="muted">{{.Dir}} · generated {{$.Generated}}</div>
<div class="cards">
<div class="card"><div class="k">before training pass@1</div><div class="v">{{if .Start}}{{pct .Start.SuccessRate}}{{else}}–{{end}}</div></div>
<div class="card"><div class="k">final eval pass@1</div><div class="v">{{if .Final}}{{pct .Final.SuccessRate}}{{else}}–{{end}}</div>{{if .Gain}}<div class="muted">{{.Gain}} points</div>{{end}}</div>
<div class="card"><div class="k">best eval pass@1</div><div class="v">{{if .Best}}{{pct .Best.SuccessRate}}{{else}}–{{end}}</div>{{if .Best}}<div class="muted">at step {{.Best.Step}}</div>{{end}}</div>
<div class="card"><div class="k">last train reward</div><div class="v">{{or .TrainReward "–"}}</div></div>
<div class="card"><div class="k">learner steps</div><div class="v">{{.Steps}}</div></div>
<div class="card"><div class="k">tokens trained</div><div class="v">{{.Tokens}}</div></div>
<div class="card"><div class="k">wall time</div><div class="v">{{.Wall}}</div></div>
<div class="card"><div class="k">shards</div><div class="v">{{len .Shards}}</div></div>
</div>
{{if .ConfigKeys}}<table><tr>{{range .ConfigKeys}}<th>{{.Key}}</th>{{end}}</tr><tr>{{range .ConfigKeys}}<td>{{.Value}}</td>{{end}}</tr></table>{{end}}

<h2>Diagnostics</h2>
<ul class="checks">{{range .Checks}}<li class="{{.Level}}">{{.Text}}</li>{{end}}{{range .Warnings}}<li class="warn">{{.}}</li>{{end}}</ul>
{{end}}{{end}}

<h2>Curves</h2>
{{if not .Figures}}<p class="muted">No metrics to plot yet.</p>{{end}}
<div class="grid">
{{range .Figures}}<figure><img src="{{.Src}}" alt="{{.Title}}"><figcaption><b>{{.Title}}</b>{{if .Note}} — {{.Note}}{{end}} <span class="muted">(plots/{{.File}})</span></figcaption></figure>
{{end}}</div>

{{if not .Compare}}{{with index .Views 0}}
<h2>Evaluations</h2>
{{if .Metrics.Eval}}<table>
<tr><th>step</th><th>iteration</th><th>pass@1</th><th>by role (closing)</th><th>by turn (cumulative)</th><th>reward</th><th>format ok</th><th>completion tokens</th><th>problems</th><th>samples</th><th>wall</th></tr>
{{range .Metrics.Eval}}<tr><td class="n">{{.Step}}</td><td class="n">{{.Iteration}}</td><td class="n"><b>{{pct .SuccessRate}}</b></td>
<td>{{range $k, $v := .SuccessByRole}}{{$k}} {{pct $v}}<br>{{end}}</td><td>{{range $k, $v := .SuccessByTurn}}t{{$k}} {{pct $v}}<br>{{end}}</td>
<td class="n">{{fmtF .RewardMean}} ± {{fmtF .RewardStd}}</td><td class="n">{{pct .FormatOKRate}}</td><td class="n">{{printf "%.1f" .CompletionTokens}}</td><td class="n">{{.Problems}}</td><td class="n">{{.Samples}}</td><td class="n">{{secs .WallSeconds}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No evaluation records in metrics.jsonl.</p>{{end}}

{{if .Iters}}<h2>Rollouts</h2>
<table>
<tr><th>iteration</th><th>split</th><th>episodes</th><th>success</th><th>rows</th><th>reward</th><th>completion tokens</th><th>parse failures</th><th>finish = length</th></tr>
{{range .Iters}}<tr><td class="n">{{.Iteration}}</td><td>{{.Split}}</td><td class="n">{{.Episodes}}</td><td class="n">{{pct .SuccessRate}}</td><td class="n">{{.Rows}}</td><td class="n">{{fmtF .Reward.Value}}</td><td class="n">{{printf "%.1f" .CompletionTokens.Value}}</td><td class="n">{{pct .FormatFailRate}}</td><td class="n">{{index .FinishReasons "length"}}</td></tr>
{{end}}</table>{{end}}

<h2>Transcripts</h2>
{{if not .Transcripts}}<p class="muted">No stored episodes.</p>{{end}}
{{range .Transcripts}}
<details open><summary>{{.Title}}: {{.ID}} <span class="badge {{if .Success}}ok{{else}}bad{{end}}">{{if .Success}}success{{else}}failed{{end}}</span></summary>
<div class="muted">problem {{.ProblemID}} · env {{.Env}} · split {{.Split}} · iteration {{.Iteration}} · {{.NumTurns}} turn(s)</div>
{{range .Blocks}}{{with .Step}}<div class="step">
<div class="h"><b>turn {{.Turn}} · {{.Role}}</b> · branch {{.Branch}}{{if .Chosen}} (chosen){{end}} · reward <b>{{.Reward}}</b> (local {{.Local}}, team {{.Team}}) · verdict <span class="badge {{if eq .Verdict "ok"}}ok{{else}}bad{{end}}">{{.Verdict}}</span> · finish {{.Finish}} · {{.Tokens}} tokens</div>
{{if .Info}}<div class="h">info: {{.Info}}</div>{{end}}
{{if .Prompt}}<details><summary>prompt</summary><pre class="prompt">{{.Prompt}}</pre></details>{{end}}
<pre>{{.Completion}}</pre></div>{{end}}
{{if .Others}}<table class="others"><tr><th>other branch</th><th>reward</th><th>verdict</th><th>completion</th></tr>
{{range .Others}}<tr><td class="n">{{.Branch}}</td><td class="n">{{.Reward}}</td><td>{{.Verdict}}</td><td>{{.Short}}</td></tr>{{end}}</table>{{end}}
{{end}}</details>
{{end}}

<h2>Config</h2>
{{if .Config}}<table><tr><th>key</th><th>value</th></tr>{{range .Config}}<tr><td>{{.Key}}</td><td>{{.Value}}</td></tr>{{end}}</table>
<details><summary>config.yaml</summary><pre>{{.ConfigText}}</pre></details>{{else}}<p class="muted">No config.yaml in the run folder.</p>{{end}}
{{end}}{{end}}
</main>
</body>
</html>
`
