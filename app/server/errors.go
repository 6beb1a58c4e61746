package server

import (
	"encoding/json"
	"net/http"
)

// apiError is OpenAI's error body: {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Error types, as OpenAI names them.
const (
	errInvalidRequest = "invalid_request_error"
	errAuth           = "authentication_error"
	errServer         = "server_error"
	errOverloaded     = "server_overloaded"
)

// writeError sends status with an OpenAI-shaped error body. param and code
// are optional ("" leaves them null).
func writeError(w http.ResponseWriter, status int, typ, message, param, code string) {
	e := apiError{Message: message, Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]apiError{"error": e})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
