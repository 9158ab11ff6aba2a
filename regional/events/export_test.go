package events

// CountEvent is countEvent, for the external tests.
var CountEvent = countEvent
