// Command benchtab reads `go test -bench` output (and peer scripts' lines in
// the same format) on stdin and prints one table: package, benchmark, and
// every metric the benchmark reported. Lines it does not recognise are
// skipped.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
)

func main() {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tbenchmark\tmetrics")
	fmt.Fprintln(tw, "-------\t---------\t-------")
	pkg := ""
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "== scripts/bench.d/"); ok {
			pkg = "peer " + strings.TrimSuffix(p, ".sh") // a peer script's lines follow
			continue
		}
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(p, "github.com/troupe-rl/troupe/")
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		var ms []string
		for i := 2; i+1 < len(f); i += 2 {
			ms = append(ms, f[i]+" "+f[i+1])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", pkg, strings.TrimPrefix(name, "Benchmark"), strings.Join(ms, ", "))
	}
	tw.Flush()
}
