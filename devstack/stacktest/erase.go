package stacktest

// DeletePermanently deletes the customer id permanently (POST
// /v1/customers/{id}/permanent-deletion), failing the test unless it is
// answered DONE.
func (a API) DeletePermanently(id string) {
	a.T.Helper()
	if d := a.OK("POST", "/v1/customers/"+id+"/permanent-deletion", nil); d["status"] != "DONE" {
		a.T.Fatalf("deletion: %v", d)
	}
}

// EraseNow is DeletePermanently, then WaitErasures: the deletion's
// asynchronous tail is done too.
func (a API) EraseNow(id string) {
	a.T.Helper()
	a.DeletePermanently(id)
	a.WaitErasures()
}
