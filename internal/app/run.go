package app

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodewright/nodewright/internal/settings"
)

// Run is the whole body of a function's main: read settings, build the App,
// start the Lambda runtime with the handler build returns. A start-up failure
// exits non-zero so Lambda reports an init error instead of a broken handler.
func Run(function string, build func(*App) (any, error)) {
	ctx := context.Background()
	s, err := settings.FromEnv(settings.Getenv)
	log := settings.Logger(os.Stdout, s.LogLevel, function)
	if err != nil {
		log.Error("configuration", "error", err.Error())
		os.Exit(1)
	}
	a, err := New(ctx, s, Options{Function: function, Out: os.Stdout})
	if err != nil {
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	h, err := build(a)
	if err != nil {
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	if fn, ok := h.(Handler); ok {
		h = WithHeartbeat(a.Metrics, a.Log, fn)
	}
	lambda.Start(h)
}
