// A minimal chat server built on the Centrifuge library (JSON protocol over WebSocket at
// /connection/websocket), for msgstorm's ws-json driver tests and scenarios. Test use only:
// the connect token is taken as the user id, unchecked.
//
// Channels: `u.<user>` is a user's inbox (only that user subscribes; anyone publishes),
// any other name is a group channel (anyone subscribes and publishes). Every publication
// is kept in the channel's history (at most -history of them, for an hour), readable by
// the history command (paged with since/limit).
//
// It prints "listening on HOST:PORT" once it accepts connections.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/centrifugal/centrifuge"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	history := flag.Int("history", 1000, "publications kept per channel")
	flag.Parse()

	node, err := centrifuge.New(centrifuge.Config{
		LogLevel:                   centrifuge.LogLevelError,
		HistoryMaxPublicationLimit: 1000,
		ClientQueueMaxSize:         64 << 20,
	})
	if err != nil {
		log.Fatal(err)
	}
	node.OnConnecting(func(_ context.Context, e centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		if e.Token == "" {
			return centrifuge.ConnectReply{}, centrifuge.DisconnectInvalidToken
		}
		return centrifuge.ConnectReply{Credentials: &centrifuge.Credentials{UserID: e.Token}}, nil
	})
	node.OnConnect(func(client *centrifuge.Client) {
		user := client.UserID()
		client.OnSubscribe(func(e centrifuge.SubscribeEvent, cb centrifuge.SubscribeCallback) {
			if strings.HasPrefix(e.Channel, "u.") && e.Channel != "u."+user {
				cb(centrifuge.SubscribeReply{}, centrifuge.ErrorPermissionDenied)
				return
			}
			cb(centrifuge.SubscribeReply{}, nil)
		})
		client.OnPublish(func(e centrifuge.PublishEvent, cb centrifuge.PublishCallback) {
			cb(centrifuge.PublishReply{Options: centrifuge.PublishOptions{
				HistorySize: *history,
				HistoryTTL:  time.Hour,
				ClientInfo:  e.ClientInfo,
			}}, nil)
		})
		client.OnHistory(func(e centrifuge.HistoryEvent, cb centrifuge.HistoryCallback) {
			if strings.HasPrefix(e.Channel, "u.") && e.Channel != "u."+user {
				cb(centrifuge.HistoryReply{}, centrifuge.ErrorPermissionDenied)
				return
			}
			cb(centrifuge.HistoryReply{}, nil)
		})
	})
	if err := node.Run(); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/connection/websocket", centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{
		CheckOrigin: func(*http.Request) bool { return true },
	}))
	fmt.Fprintf(os.Stdout, "listening on %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}
