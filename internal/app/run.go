package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodewright/nodewright/internal/settings"
)

// Run is the whole body of a function's main: read settings, build the App,
// start the Lambda runtime with the Handle method of the controller handler
// build returns (a method expression such as (*App).ProvisionerHandler),
// wrapped by Wrap (the heartbeat, shadow mode's record). A start-up failure exits non-zero so Lambda
// reports an init error instead of a broken handler.
func Run[H controllerHandler](function string, build func(*App) (H, error)) {
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
	lambda.Start(a.Wrap(h.Handle))
}

// controllerHandler is what every controller package's Handler is.
type controllerHandler interface {
	Handle(ctx context.Context, raw json.RawMessage) (any, error)
}

// FunctionHandler is the handler of the function named fn (provisioner,
// lifecycle, interruption, disruption) as its functions/<fn>/main.go hands
// it to Run, before Wrap: the one place the harnesses that run the
// functions in-process build them from.
func (a *App) FunctionHandler(fn string) (Handler, error) {
	switch fn {
	case "provisioner":
		return handleOf(a.ProvisionerHandler())
	case "lifecycle":
		return handleOf(a.LifecycleHandler())
	case "interruption":
		return handleOf(a.InterruptionHandler())
	case "disruption":
		return handleOf(a.DisruptionFunction())
	}
	return nil, fmt.Errorf("app: no function %q", fn)
}

func handleOf[H controllerHandler](h H, err error) (Handler, error) {
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
