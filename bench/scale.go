package main

import (
	"context"
	"time"
)

// runScale is the scale section: each hot path measured at growing sizes
// of the data it could touch, the databases kept between the passes, the
// growth written as the largest size's p50 over the smallest's. The
// engine's paths are scaleEngine's (scale_engine.go), the data paths (a
// card's history, the customers list filtered by metadata, vouchers by
// code, the export) scaleData's (scale_data.go).
func runScale(b *benchRun, profile string) (string, error) {
	t0 := time.Now()
	er, err := scaleEngine(context.Background(), b.stack, b.d, profile)
	report := "## Scale\n\n" + scaleEngineReport(er)
	if err != nil {
		return report, err
	}
	data, err := scaleData(b)
	report += "\n" + data
	if err != nil {
		return report, err
	}
	return report + "\nThe section ran in " + time.Since(t0).Round(time.Second).String() + ".\n", nil
}
