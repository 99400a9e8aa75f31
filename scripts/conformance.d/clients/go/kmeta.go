package main

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kgoMetadata asks for the brokers only (no topics).
func kgoMetadata() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	return req
}

// brokersOf lists host:port of every broker a Metadata answer names.
func brokersOf(resp kmsg.Response) []string {
	var out []string
	if m, ok := resp.(*kmsg.MetadataResponse); ok {
		for _, b := range m.Brokers {
			out = append(out, fmt.Sprintf("%s:%d", b.Host, b.Port))
		}
	}
	return out
}
