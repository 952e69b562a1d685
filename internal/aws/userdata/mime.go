package userdata

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"strings"
)

// MIME content types cloud-init and nodeadm understand.
const (
	ContentTypeShell      = `text/x-shellscript; charset="us-ascii"`
	ContentTypeNodeConfig = "application/node.eks.aws"
	// boundary matches Karpenter's so merged archives diff cleanly against it.
	boundary = "//"
)

// Part is one entry of a MIME multi-part user data archive.
type Part struct {
	ContentType string
	Content     string
}

// isMIME reports whether s already is a MIME document (as Karpenter decides it).
func isMIME(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "MIME-Version:") || strings.HasPrefix(t, "Content-Type:")
}

// ParseMIME splits a multipart MIME document into its parts.
func ParseMIME(s string) ([]Part, error) {
	msg, err := mail.ReadMessage(strings.NewReader(s))
	if err != nil {
		return nil, fmt.Errorf("parse MIME user data: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("parse MIME user data: Content-Type header: %w", err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("parse MIME user data: Content-Type %q is not multipart", mediaType)
	}
	if params["boundary"] == "" {
		return nil, fmt.Errorf("parse MIME user data: multipart Content-Type has no boundary")
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var parts []Part
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse MIME user data part %d: %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("read MIME user data part %d: %w", len(parts)+1, err)
		}
		ct := p.Header.Get("Content-Type")
		if ct == "" {
			ct = "text/plain"
		}
		parts = append(parts, Part{ContentType: ct, Content: string(body)})
	}
	return parts, nil
}

// SerializeMIME writes parts as a multipart/mixed document with LF line ends.
func SerializeMIME(parts []Part) (string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		return "", err
	}
	buf.WriteString("MIME-Version: 1.0\n")
	fmt.Fprintf(&buf, "Content-Type: multipart/mixed; boundary=%q\n\n", boundary)
	for i, p := range parts {
		pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {p.ContentType}})
		if err != nil {
			return "", fmt.Errorf("write MIME part %d: %w", i+1, err)
		}
		if _, err := io.WriteString(pw, p.Content); err != nil {
			return "", fmt.Errorf("write MIME part %d: %w", i+1, err)
		}
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("close MIME archive: %w", err)
	}
	// multipart writes CRLF; cloud-init accepts either and LF keeps golden files readable.
	return strings.ReplaceAll(buf.String(), "\r", ""), nil
}
