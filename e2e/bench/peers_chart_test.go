package bench

// The chart is hand-written SVG: two bar panels are all it takes, and a
// plotting library (gonum/plot and the like) would bring fonts, image
// back ends and a dozen modules into go.mod for them.

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
)

// chartColors are the systems' bar colours.
var chartColors = map[string]string{
	sysTether: "#1f6fb4",
	sysBridge: "#8fbbe0",
	sysNode:   "#3a9a3a",
	sysPython: "#e08a1e",
}

// Chart geometry, in SVG user units.
const (
	chartWidth   = 980
	chartPanelH  = 300
	chartTop     = 70 // title and legend
	chartLeft    = 70 // y-axis labels
	chartRight   = 20
	chartBottomH = 50 // group labels under each panel
)

// peersChart draws calls per broker CPU-second (linear scale) and p99
// latency (log scale) for every system, per topology and concurrency:
// medians over the rounds.
func peersChart(r *peersRun) []byte {
	type group struct {
		topo string
		conc int
	}
	var groups []group
	for _, topo := range r.Config.Topologies {
		for _, conc := range r.Config.Concs {
			groups = append(groups, group{topo, conc})
		}
	}
	var systems []string
	for _, sys := range r.Config.Systems {
		for _, g := range groups {
			if r.figure(sys, g.topo, g.conc, metricCPU) != nil {
				systems = append(systems, sys)
				break
			}
		}
	}
	height := chartTop + 2*(chartPanelH+chartBottomH)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("tether and its peers, %s: medians of %d round(s), %gs per cell", r.dateLabel(), r.Config.Rounds, r.Config.MeasureS)
	if !r.Full {
		title += " (short run)"
	}
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", chartLeft, html.EscapeString(title))
	x := float64(chartLeft)
	for _, sys := range systems {
		fmt.Fprintf(&b, `<rect x="%.0f" y="36" width="14" height="14" fill="%s"/><text x="%.0f" y="48">%s</text>`+"\n", x, chartColors[sys], x+19, html.EscapeString(systemLabels[sys]))
		x += 40 + 7.5*float64(len(systemLabels[sys]))
	}

	panel := func(top float64, label string, metric string, logScale bool) {
		plotW := float64(chartWidth - chartLeft - chartRight)
		plotH := float64(chartPanelH - 30)
		y0 := top + 30 // the plot's top; the panel label is above it
		var values []float64
		for _, g := range groups {
			for _, sys := range systems {
				if f := r.figure(sys, g.topo, g.conc, metric); f != nil && f.Median > 0 {
					values = append(values, f.Median)
				}
			}
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-size="13" font-weight="bold">%s</text>`+"\n", chartLeft, top+18, html.EscapeString(label))
		if len(values) == 0 {
			return
		}
		// scale maps a value to its height above the axis.
		var scale func(v float64) float64
		var ticks []float64
		if logScale {
			lo := math.Pow(10, math.Floor(math.Log10(slices.Min(values))))
			hi := math.Pow(10, math.Ceil(math.Log10(slices.Max(values))))
			if hi <= lo {
				hi = lo * 10
			}
			scale = func(v float64) float64 { return plotH * math.Log10(v/lo) / math.Log10(hi/lo) }
			for t := lo; t <= hi*1.001; t *= 10 {
				ticks = append(ticks, t)
			}
		} else {
			hi := niceCeil(slices.Max(values) * 1.08)
			scale = func(v float64) float64 { return plotH * v / hi }
			for i := range 6 {
				ticks = append(ticks, hi*float64(i)/5)
			}
		}
		for _, t := range ticks {
			y := y0 + plotH - scale(t)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
				chartLeft, y, float64(chartLeft)+plotW, y, chartLeft-6, y+4, shortNumber(t))
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#333"/>`+"\n", chartLeft, y0+plotH, float64(chartLeft)+plotW, y0+plotH)
		groupW := plotW / float64(len(groups))
		barW := min(groupW*0.8/float64(max(len(systems), 1)), 48)
		for gi, g := range groups {
			gx := float64(chartLeft) + groupW*float64(gi) + groupW*0.1
			bars := gx + (groupW*0.8-barW*float64(len(systems)))/2 // centred when barW is capped
			for si, sys := range systems {
				f := r.figure(sys, g.topo, g.conc, metric)
				if f == nil || f.Median <= 0 {
					continue
				}
				h := max(scale(f.Median), 1)
				bx := bars + barW*float64(si)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
					bx, y0+plotH-h, barW-2, h, chartColors[sys], html.EscapeString(fmt.Sprintf("%s, %s, c=%d: %.4g", systemLabels[sys], topologyLabel(g.topo), g.conc, f.Median)))
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%s</text>`+"\n", bx+(barW-2)/2, y0+plotH-h-3, shortNumber(f.Median))
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", gx+groupW*0.4, y0+plotH+18, html.EscapeString(topologyLabel(g.topo)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">c=%d</text>`+"\n", gx+groupW*0.4, y0+plotH+34, g.conc)
		}
	}
	panel(chartTop, "calls per broker CPU-second (higher is better)", metricCPU, false)
	panel(chartTop+chartPanelH+chartBottomH, "p99 latency, ms (lower is better; log scale)", metricP99, true)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// shortNumber writes v in three significant digits at most, with k for
// thousands: 21.7k, 950, 0.42.
func shortNumber(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000:
		return fmt.Sprintf("%.3gk", v/1000)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
