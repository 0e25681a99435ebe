package proctune

// SchedWaits exposes the default Config.Waits to the tests.
var SchedWaits = schedWaits
