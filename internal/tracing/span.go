package tracing

import (
	"fmt"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// spanData is what the batcher queues and appendRequest encodes: the
// methods of sdktrace.ReadOnlySpan the encoding reads. The SDK's spans
// have them, and so does leanSpan, which cannot be a ReadOnlySpan (that
// interface has an unexported method).
type spanData interface {
	Name() string
	SpanContext() trace.SpanContext
	Parent() trace.SpanContext
	SpanKind() trace.SpanKind
	StartTime() time.Time
	EndTime() time.Time
	Attributes() []attribute.KeyValue
	Links() []sdktrace.Link
	Events() []sdktrace.Event
	Status() sdktrace.Status
	InstrumentationScope() instrumentation.Scope
	Resource() *resource.Resource
	DroppedAttributes() int
	DroppedLinks() int
	DroppedEvents() int
}

var (
	_ spanData   = sdktrace.ReadOnlySpan(nil)
	_ spanData   = (*leanSpan)(nil)
	_ trace.Span = (*leanSpan)(nil)
)

// The SDK's default span limits, which the lean span keeps; leanTracing is
// used only when the SDK's provider has them too (leanLimits).
const (
	attributeCountLimit         = sdktrace.DefaultAttributeCountLimit
	eventCountLimit             = sdktrace.DefaultEventCountLimit
	linkCountLimit              = sdktrace.DefaultLinkCountLimit
	attributePerEventCountLimit = sdktrace.DefaultAttributePerEventCountLimit
	attributePerLinkCountLimit  = sdktrace.DefaultAttributePerLinkCountLimit
)

// leanLimits are the SDK's default span limits, those leanSpan keeps (it
// leaves the depth of nested values to its callers, see leanSpan). Setup
// installs leanTracing only when sdktrace.NewSpanLimits, the limits the
// SDK's provider reads from the OTEL_*_LIMIT variables by its own rules,
// equals them.
var leanLimits = sdktrace.SpanLimits{
	AttributeValueLengthLimit:   sdktrace.DefaultAttributeValueLengthLimit,
	AttributeValueDepthLimit:    sdktrace.DefaultAttributeValueDepthLimit,
	AttributeCountLimit:         attributeCountLimit,
	EventCountLimit:             eventCountLimit,
	LinkCountLimit:              linkCountLimit,
	AttributePerEventCountLimit: attributePerEventCountLimit,
	AttributePerLinkCountLimit:  attributePerLinkCountLimit,
}

// leanSpan is the span of a tether tracer (Tracer) while leanTracing is
// installed: one allocation with its few attributes inline, ended straight
// into the batcher's queue, where the SDK's span allocates its attributes,
// events and links apart, and snapshots itself into a second span at its
// end. The SDK's span start and end were ~1.5-2 µs of a traced broker's
// ~31 µs per call (perf under BenchmarkTracingCost, e2e/bench); see
// leanTracing for the figure this wins.
//
// It records what the SDK's span records, with the SDK's rules: a repeated
// attribute key keeps its first place and its last value, invalid
// attributes are dropped and counted, the default limits (128 attributes,
// events, links; 128 attributes per event and link) drop and count beyond
// them, the status goes Unset < Error < Ok, and nothing changes once it
// ended. It does not cut nested (slice or map) attribute values at the
// SDK's depth of 64: tether's spans carry strings and numbers; nor does it
// add the stack trace RecordError's trace.WithStackTrace asks the SDK's
// for: nothing of tether's records an error on these spans.
//
// All methods may be called concurrently. The spanData methods are read
// by the exporter once the span ended, when nothing changes it any more.
type leanSpan struct {
	embedded.Span

	lt     *leanTracing
	scope  *instrumentation.Scope
	sc     trace.SpanContext
	parent trace.SpanContext
	kind   trace.SpanKind

	// recording is false for a span the sampler dropped: it only carries
	// its span context. sampled spans go to the batcher at End.
	recording bool

	mu         sync.Mutex
	name       string
	start, end time.Time // end is zero until the span ended, as the SDK's endTime
	attrs      []attribute.KeyValue
	attrBuf    [5]attribute.KeyValue // a call span's four at its start and its outcome
	dropAttrs  int
	events     []sdktrace.Event
	eventBuf   [1]sdktrace.Event
	dropEvents int
	links      []sdktrace.Link
	dropLinks  int
	status     sdktrace.Status
}

// SpanContext implements trace.Span.
func (s *leanSpan) SpanContext() trace.SpanContext { return s.sc }

// IsRecording implements trace.Span.
func (s *leanSpan) IsRecording() bool {
	if !s.recording {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end.IsZero()
}

// TracerProvider implements trace.Span: the SDK's provider Setup
// installed.
func (s *leanSpan) TracerProvider() trace.TracerProvider { return s.lt.provider }

// End implements trace.Span: a sampled span goes to the batcher.
func (s *leanSpan) End(opts ...trace.SpanEndOption) {
	if !s.recording {
		return
	}
	end := time.Now()
	if len(opts) > 0 {
		c := trace.NewSpanEndConfig(opts...)
		if ts := c.Timestamp(); !ts.IsZero() {
			end = ts
		}
	}
	s.mu.Lock()
	if !s.end.IsZero() {
		s.mu.Unlock()
		return
	}
	s.end = end
	s.mu.Unlock()
	if s.sc.IsSampled() {
		s.lt.batcher.enqueue(s)
	}
}

// lockRecording locks s and reports whether it still records; when it
// returns false, s is not locked.
func (s *leanSpan) lockRecording() bool {
	if !s.recording {
		return false
	}
	s.mu.Lock()
	if !s.end.IsZero() {
		s.mu.Unlock()
		return false
	}
	return true
}

// SetAttributes implements trace.Span.
func (s *leanSpan) SetAttributes(kv ...attribute.KeyValue) {
	if len(kv) == 0 || !s.lockRecording() {
		return
	}
	defer s.mu.Unlock()
	s.setAttributes(kv)
}

// setAttributes adds kv under s.mu.
func (s *leanSpan) setAttributes(kv []attribute.KeyValue) {
next:
	for _, a := range kv {
		if !a.Valid() {
			s.dropAttrs++
			continue
		}
		for i := range s.attrs {
			if s.attrs[i].Key == a.Key {
				s.attrs[i].Value = a.Value
				continue next
			}
		}
		if len(s.attrs) >= attributeCountLimit {
			s.dropAttrs++
			continue
		}
		s.attrs = append(s.attrs, a)
	}
}

// AddEvent implements trace.Span.
func (s *leanSpan) AddEvent(name string, opts ...trace.EventOption) {
	if !s.lockRecording() {
		return
	}
	defer s.mu.Unlock()
	s.addEvent(name, opts)
}

// addEvent adds the event under s.mu.
func (s *leanSpan) addEvent(name string, opts []trace.EventOption) {
	e := sdktrace.Event{Name: name}
	if len(opts) == 0 {
		e.Time = time.Now()
	} else {
		c := trace.NewEventConfig(opts...)
		e.Time, e.Attributes = c.Timestamp(), c.Attributes()
		if len(e.Attributes) > attributePerEventCountLimit {
			e.DroppedAttributeCount = len(e.Attributes) - attributePerEventCountLimit
			e.Attributes = e.Attributes[:attributePerEventCountLimit]
		}
	}
	if len(s.events) >= eventCountLimit { // the oldest goes, as in the SDK's evicted queue
		copy(s.events, s.events[1:])
		s.events = s.events[:len(s.events)-1]
		s.dropEvents++
	}
	if s.events == nil {
		s.events = s.eventBuf[:0]
	}
	s.events = append(s.events, e)
}

// RecordError implements trace.Span: an "exception" event, as the SDK's.
func (s *leanSpan) RecordError(err error, opts ...trace.EventOption) {
	if err == nil || !s.lockRecording() {
		return
	}
	defer s.mu.Unlock()
	opts = append(opts, trace.WithAttributes(semconv.ExceptionType(errorType(err)), semconv.ExceptionMessage(err.Error())))
	s.addEvent(semconv.ExceptionEventName, opts)
}

// errorType names err's type as the SDK's RecordError names it.
func errorType(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return fmt.Sprintf("%s.%s", t.PkgPath(), t.Name())
}

// AddLink implements trace.Span.
func (s *leanSpan) AddLink(l trace.Link) {
	if !s.lockRecording() {
		return
	}
	defer s.mu.Unlock()
	s.addLink(l)
}

// addLink adds l under s.mu, as the SDK's AddLink: a link with nothing in
// it is ignored, and beyond the limit the oldest goes.
func (s *leanSpan) addLink(l trace.Link) {
	if !l.SpanContext.IsValid() && len(l.Attributes) == 0 && l.SpanContext.TraceState().Len() == 0 {
		return
	}
	sl := sdktrace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes}
	if len(sl.Attributes) > attributePerLinkCountLimit {
		sl.DroppedAttributeCount = len(sl.Attributes) - attributePerLinkCountLimit
		sl.Attributes = sl.Attributes[:attributePerLinkCountLimit]
	}
	if len(s.links) >= linkCountLimit {
		copy(s.links, s.links[1:])
		s.links = s.links[:len(s.links)-1]
		s.dropLinks++
	}
	s.links = append(s.links, sl)
}

// SetStatus implements trace.Span: Ok is final, Error overrides Unset, and
// only an Error keeps its description.
func (s *leanSpan) SetStatus(code codes.Code, description string) {
	if !s.lockRecording() {
		return
	}
	defer s.mu.Unlock()
	if s.status.Code > code {
		return
	}
	st := sdktrace.Status{Code: code}
	if code == codes.Error {
		st.Description = description
	}
	s.status = st
}

// SetName implements trace.Span.
func (s *leanSpan) SetName(name string) {
	if !s.lockRecording() {
		return
	}
	defer s.mu.Unlock()
	s.name = name
}

// The spanData methods, read once the span ended.

func (s *leanSpan) Name() string                     { return s.name }
func (s *leanSpan) Parent() trace.SpanContext        { return s.parent }
func (s *leanSpan) SpanKind() trace.SpanKind         { return s.kind }
func (s *leanSpan) StartTime() time.Time             { return s.start }
func (s *leanSpan) EndTime() time.Time               { return s.end }
func (s *leanSpan) Attributes() []attribute.KeyValue { return s.attrs }
func (s *leanSpan) Links() []sdktrace.Link           { return s.links }
func (s *leanSpan) Events() []sdktrace.Event         { return s.events }
func (s *leanSpan) Status() sdktrace.Status          { return s.status }
func (s *leanSpan) Resource() *resource.Resource     { return s.lt.resource }
func (s *leanSpan) DroppedAttributes() int           { return s.dropAttrs }
func (s *leanSpan) DroppedLinks() int                { return s.dropLinks }
func (s *leanSpan) DroppedEvents() int               { return s.dropEvents }

func (s *leanSpan) InstrumentationScope() instrumentation.Scope { return *s.scope }
