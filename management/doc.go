// Package management is the control plane's API for platform admins:
// projects, their application keys, and clusters, all stored in the tenancy
// directory. Like the regional service it trusts only the router, which has
// already checked the X-Management-Id and X-Management-Token headers.
package management
