package customers

import "net/url"

// ListStatements are the page and total reads of GET /v1/customers with
// query q, for the plan test: SQL and arguments of each.
func ListStatements(projectID string, q url.Values) (page string, pageArgs []any, count string, countArgs []any, err error) {
	lq, err := parseList(q)
	if err != nil {
		return "", nil, "", nil, err
	}
	ls, err := listSQL(projectID, lq)
	return ls.page, ls.pageArgs, ls.count, ls.countArgs, err
}
